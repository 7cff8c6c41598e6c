/* oai-load: a load client for the router's tests and benchmark. It sends OpenAI requests (chat
 * completions by default) from one thread with libcurl multi, N at a time, for a count or a
 * duration, and writes one JSON line per request (model, status, Retry-After, latency, bytes, the
 * serving Pod's X-Sim-Pod) and a JSON summary (counts by status, latency percentiles).
 * Usage: oai-load --help. */
#include <curl/curl.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <cjson/cJSON.h>

typedef struct load_opts {
    const char *url;
    int concurrency;
    long requests;     /* 0: run for duration_s */
    double duration_s; /* 0: run for requests */
    char **models;
    int nmodels;
    bool random; /* pick models at random (--seed), else round robin */
    uint64_t seed;
    bool stream;
    double timeout_s;
    int max_tokens;
    const char *out; /* per-request lines; NULL: none */
} load_opts;

/* One request in flight; the easy handle is kept across requests so connections are reused. */
typedef struct load_slot {
    CURL *e;
    struct curl_slist *headers;
    char *body;
    const char *model;
    long index;
    double t0, t_first; /* seconds since the run began; t_first < 0 until the first byte */
    size_t bytes;
    char retry_after[32];
    char pod[128];
    char err[CURL_ERROR_SIZE];
} load_slot;

typedef struct load_run {
    load_opts o;
    FILE *out;
    double start;
    long started, done;
    long codes[600]; /* by status; [0]: no response */
    double *ms;      /* every latency, for the percentiles */
    size_t nms, cap;
    uint64_t rng;
    int next_model;
} load_run;

static double load_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void load_usage(FILE *f)
{
    fputs("usage: oai-load --url URL [options]\n"
          "  --url URL            the endpoint, e.g. http://127.0.0.1:8080/v1/chat/completions\n"
          "  --concurrency N      requests in flight at once (default 1)\n"
          "  --requests N         send N requests (default 1) ...\n"
          "  --duration S         ... or keep sending for S seconds\n"
          "  --model a,b,c        the models, round robin (default \"sim\")\n"
          "  --seed N             pick the models at random with this seed instead\n"
          "  --stream             ask for SSE (\"stream\": true)\n"
          "  --max-tokens N       max_tokens of each request (default 8)\n"
          "  --timeout S          per-request timeout (default 60)\n"
          "  --out FILE           one JSON line per request (- for stdout)\n"
          "Each body carries messages, prompt and input, so any of the three endpoints takes it.\n"
          "The summary is one JSON line on stdout (after the request lines when --out is -).\n",
          f);
}

static int load_fail(const char *msg, const char *arg)
{
    fprintf(stderr, "oai-load: %s%s%s\n", msg, arg ? ": " : "", arg ? arg : "");
    load_usage(stderr);
    return 2;
}

static bool load_number(const char *s, double min, double max, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (!*s || *end || errno || !(v >= min && v <= max))
        return false;
    *out = v;
    return true;
}

static int load_split_models(load_opts *o, const char *list)
{
    char *copy = strdup(list);
    if (!copy)
        return -1;
    for (char *save = NULL, *m = strtok_r(copy, ",", &save); m; m = strtok_r(NULL, ",", &save)) {
        char **grown = realloc(o->models, sizeof(*grown) * (size_t)(o->nmodels + 1));
        if (grown)
            o->models = grown;
        if (!grown || !(o->models[o->nmodels] = strdup(m))) {
            free(copy);
            return -1;
        }
        o->nmodels++;
    }
    free(copy);
    return o->nmodels ? 0 : -1;
}

static int load_parse(int argc, char **argv, load_opts *o)
{
    static const struct option longs[] = {
        {"url", required_argument, NULL, 'u'},
        {"concurrency", required_argument, NULL, 'c'},
        {"requests", required_argument, NULL, 'n'},
        {"duration", required_argument, NULL, 'd'},
        {"model", required_argument, NULL, 'm'},
        {"seed", required_argument, NULL, 's'},
        {"stream", no_argument, NULL, 'S'},
        {"timeout", required_argument, NULL, 't'},
        {"max-tokens", required_argument, NULL, 'k'},
        {"out", required_argument, NULL, 'o'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    *o = (load_opts){.concurrency = 1, .timeout_s = 60, .max_tokens = 8};
    double v;
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "", longs, NULL)) != -1) {
        switch (c) {
        case 'u':
            o->url = optarg;
            break;
        case 'c':
            if (!load_number(optarg, 1, 100000, &v) || v != floor(v))
                return load_fail("--concurrency wants a whole number from 1", optarg);
            o->concurrency = (int)v;
            break;
        case 'n':
            if (!load_number(optarg, 1, 1e12, &v) || v != floor(v))
                return load_fail("--requests wants a whole number from 1", optarg);
            o->requests = (long)v;
            break;
        case 'd':
            if (!load_number(optarg, 0.001, 1e7, &v))
                return load_fail("--duration wants seconds above 0", optarg);
            o->duration_s = v;
            break;
        case 'm':
            if (load_split_models(o, optarg) < 0)
                return load_fail("--model wants a comma-separated list of names", optarg);
            break;
        case 's':
            if (!load_number(optarg, 0, 1.8e19, &v) || v != floor(v))
                return load_fail("--seed wants a whole number", optarg);
            o->random = true;
            o->seed = (uint64_t)v;
            break;
        case 'S':
            o->stream = true;
            break;
        case 't':
            if (!load_number(optarg, 0.001, 1e7, &v))
                return load_fail("--timeout wants seconds above 0", optarg);
            o->timeout_s = v;
            break;
        case 'k':
            if (!load_number(optarg, 1, 1e6, &v) || v != floor(v))
                return load_fail("--max-tokens wants a whole number from 1", optarg);
            o->max_tokens = (int)v;
            break;
        case 'o':
            o->out = optarg;
            break;
        case 'h':
            load_usage(stdout);
            return 1;
        default:
            return load_fail("unknown flag or missing value", argv[optind - 1]);
        }
    }
    if (optind < argc)
        return load_fail("unexpected argument", argv[optind]);
    if (!o->url)
        return load_fail("--url is required", NULL);
    if (o->requests && o->duration_s)
        return load_fail("--requests and --duration exclude each other", NULL);
    if (!o->requests && !o->duration_s)
        o->requests = 1;
    if (!o->nmodels && load_split_models(o, "sim") < 0)
        return load_fail("out of memory", NULL);
    return 0;
}

static const char *load_pick_model(load_run *run)
{
    if (!run->o.random)
        return run->o.models[run->next_model++ % run->o.nmodels];
    run->rng ^= run->rng << 13; /* xorshift64: the same seed, the same sequence */
    run->rng ^= run->rng >> 7;
    run->rng ^= run->rng << 17;
    return run->o.models[run->rng % (uint64_t)run->o.nmodels];
}

static size_t load_on_body(char *data, size_t size, size_t n, void *ud)
{
    (void)data;
    load_slot *s = ud;
    if (s->t_first < 0)
        s->t_first = load_now();
    s->bytes += size * n;
    return size * n;
}

/* Keeps the value of a header we report, trimmed, when the line is "name: value". */
static void load_header_value(const char *line, size_t len, const char *name, char *out,
                              size_t outlen)
{
    size_t nl = strlen(name);
    if (len <= nl || strncasecmp(line, name, nl) != 0 || line[nl] != ':')
        return;
    const char *v = line + nl + 1, *end = line + len;
    while (v < end && (*v == ' ' || *v == '\t'))
        v++;
    while (end > v && (end[-1] == '\r' || end[-1] == '\n' || end[-1] == ' '))
        end--;
    snprintf(out, outlen, "%.*s", (int)(end - v), v);
}

static size_t load_on_header(char *line, size_t size, size_t n, void *ud)
{
    load_slot *s = ud;
    size_t len = size * n;
    if (len > 5 && strncmp(line, "HTTP/", 5) == 0) /* a new response (after a 100): start over */
        s->retry_after[0] = s->pod[0] = 0;
    load_header_value(line, len, "Retry-After", s->retry_after, sizeof(s->retry_after));
    load_header_value(line, len, "X-Sim-Pod", s->pod, sizeof(s->pod));
    return len;
}

static int load_start(load_run *run, CURLM *multi, load_slot *s)
{
    const load_opts *o = &run->o;
    s->model = load_pick_model(run);
    s->index = run->started++;
    s->t0 = load_now();
    s->t_first = -1;
    s->bytes = 0;
    s->retry_after[0] = s->pod[0] = s->err[0] = 0;
    cJSON *body = cJSON_CreateObject();
    cJSON_AddStringToObject(body, "model", s->model);
    cJSON *msg = cJSON_CreateObject();
    cJSON_AddStringToObject(msg, "role", "user");
    cJSON_AddStringToObject(msg, "content", "Say something.");
    cJSON_AddItemToArray(cJSON_AddArrayToObject(body, "messages"), msg);
    cJSON_AddStringToObject(body, "prompt", "Say something.");
    cJSON_AddStringToObject(body, "input", "Say something.");
    cJSON_AddNumberToObject(body, "max_tokens", o->max_tokens);
    if (o->stream)
        cJSON_AddBoolToObject(body, "stream", true);
    free(s->body);
    s->body = cJSON_PrintUnformatted(body);
    cJSON_Delete(body);
    if (!s->body)
        return -1;
    if (!s->e && !(s->e = curl_easy_init()))
        return -1;
    if (!s->headers) {
        s->headers = curl_slist_append(NULL, "Content-Type: application/json");
        if (!s->headers)
            return -1;
    }
    curl_easy_setopt(s->e, CURLOPT_URL, o->url);
    curl_easy_setopt(s->e, CURLOPT_POSTFIELDS, s->body);
    curl_easy_setopt(s->e, CURLOPT_HTTPHEADER, s->headers);
    curl_easy_setopt(s->e, CURLOPT_WRITEFUNCTION, load_on_body);
    curl_easy_setopt(s->e, CURLOPT_WRITEDATA, s);
    curl_easy_setopt(s->e, CURLOPT_HEADERFUNCTION, load_on_header);
    curl_easy_setopt(s->e, CURLOPT_HEADERDATA, s);
    curl_easy_setopt(s->e, CURLOPT_ERRORBUFFER, s->err);
    curl_easy_setopt(s->e, CURLOPT_TIMEOUT_MS, (long)(o->timeout_s * 1000));
    curl_easy_setopt(s->e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(s->e, CURLOPT_TCP_NODELAY, 1L);
    curl_easy_setopt(s->e, CURLOPT_PRIVATE, s);
    return curl_multi_add_handle(multi, s->e) == CURLM_OK ? 0 : -1;
}

static void load_finish(load_run *run, load_slot *s, CURLcode rc)
{
    double end = load_now();
    long code = 0;
    if (rc == CURLE_OK)
        curl_easy_getinfo(s->e, CURLINFO_RESPONSE_CODE, &code);
    if (code < 0 || code >= 600)
        code = 0;
    run->codes[code]++;
    run->done++;
    double ms = (end - s->t0) * 1e3;
    if (run->nms == run->cap) {
        size_t cap = run->cap ? run->cap * 2 : 1024;
        double *grown = realloc(run->ms, cap * sizeof(*grown));
        if (grown) {
            run->ms = grown;
            run->cap = cap;
        }
    }
    if (run->nms < run->cap)
        run->ms[run->nms++] = ms;
    if (!run->out)
        return;
    cJSON *line = cJSON_CreateObject();
    cJSON_AddNumberToObject(line, "i", (double)s->index);
    cJSON_AddStringToObject(line, "model", s->model);
    cJSON_AddNumberToObject(line, "code", (double)code);
    if (s->retry_after[0])
        cJSON_AddStringToObject(line, "retry_after", s->retry_after);
    else
        cJSON_AddNullToObject(line, "retry_after");
    cJSON_AddNumberToObject(line, "start_ms", round((s->t0 - run->start) * 1e6) / 1e3);
    cJSON_AddNumberToObject(line, "ms", round(ms * 1e3) / 1e3);
    if (s->t_first >= 0)
        cJSON_AddNumberToObject(line, "first_byte_ms", round((s->t_first - s->t0) * 1e6) / 1e3);
    cJSON_AddNumberToObject(line, "bytes", (double)s->bytes);
    if (s->pod[0])
        cJSON_AddStringToObject(line, "pod", s->pod);
    else
        cJSON_AddNullToObject(line, "pod");
    if (rc != CURLE_OK)
        cJSON_AddStringToObject(line, "error", s->err[0] ? s->err : curl_easy_strerror(rc));
    char *text = cJSON_PrintUnformatted(line);
    cJSON_Delete(line);
    if (text)
        fprintf(run->out, "%s\n", text);
    free(text);
}

static int load_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The nearest-rank percentile of the sorted latencies. */
static double load_pct(const load_run *run, double p)
{
    if (!run->nms)
        return 0;
    size_t rank = (size_t)ceil(p / 100 * (double)run->nms);
    return run->ms[rank ? rank - 1 : 0];
}

static void load_summary(load_run *run, double elapsed)
{
    qsort(run->ms, run->nms, sizeof(*run->ms), load_cmp);
    cJSON *sum = cJSON_CreateObject();
    cJSON_AddNumberToObject(sum, "requests", (double)run->done);
    cJSON *codes = cJSON_AddObjectToObject(sum, "codes");
    for (int c = 0; c < 600; c++)
        if (run->codes[c]) {
            char name[8];
            snprintf(name, sizeof(name), "%d", c);
            cJSON_AddNumberToObject(codes, name, (double)run->codes[c]);
        }
    cJSON_AddNumberToObject(sum, "p50_ms", round(load_pct(run, 50) * 1e3) / 1e3);
    cJSON_AddNumberToObject(sum, "p99_ms", round(load_pct(run, 99) * 1e3) / 1e3);
    cJSON_AddNumberToObject(sum, "max_ms", run->nms ? round(run->ms[run->nms - 1] * 1e3) / 1e3 : 0);
    cJSON_AddNumberToObject(sum, "seconds", round(elapsed * 1e3) / 1e3);
    cJSON_AddNumberToObject(sum, "rps",
                            elapsed > 0 ? round((double)run->done / elapsed * 10) / 10 : 0);
    char *text = cJSON_PrintUnformatted(sum);
    cJSON_Delete(sum);
    if (text)
        printf("%s\n", text);
    free(text);
}

static bool load_more(const load_run *run)
{
    if (run->o.requests)
        return run->started < run->o.requests;
    return load_now() - run->start < run->o.duration_s;
}

int main(int argc, char **argv)
{
    load_run run = {0};
    int rc = load_parse(argc, argv, &run.o);
    if (rc)
        return rc == 1 ? 0 : rc;
    run.rng = run.o.seed ? run.o.seed : 0x9e3779b97f4a7c15ull;
    if (run.o.out) {
        run.out = strcmp(run.o.out, "-") == 0 ? stdout : fopen(run.o.out, "w");
        if (!run.out) {
            fprintf(stderr, "oai-load: cannot write %s: %s\n", run.o.out, strerror(errno));
            return 1;
        }
    }
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        fprintf(stderr, "oai-load: libcurl would not start\n");
        return 1;
    }
    CURLM *multi = curl_multi_init();
    load_slot *slots = calloc((size_t)run.o.concurrency, sizeof(*slots));
    if (!multi || !slots) {
        fprintf(stderr, "oai-load: out of memory\n");
        return 1;
    }
    curl_multi_setopt(multi, CURLMOPT_MAXCONNECTS, (long)run.o.concurrency);
    run.start = load_now();
    int running = 0;
    for (int i = 0; i < run.o.concurrency && load_more(&run); i++, running++)
        if (load_start(&run, multi, &slots[i]) < 0) {
            fprintf(stderr, "oai-load: cannot start a request\n");
            return 1;
        }
    while (running > 0) {
        int still;
        curl_multi_perform(multi, &still);
        CURLMsg *m;
        int left;
        while ((m = curl_multi_info_read(multi, &left))) {
            if (m->msg != CURLMSG_DONE)
                continue;
            load_slot *s;
            curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&s);
            CURLcode result = m->data.result;
            curl_multi_remove_handle(multi, s->e);
            load_finish(&run, s, result);
            running--;
            if (load_more(&run)) {
                if (load_start(&run, multi, s) < 0) {
                    fprintf(stderr, "oai-load: cannot start a request\n");
                    return 1;
                }
                running++;
            }
        }
        if (running > 0)
            curl_multi_poll(multi, NULL, 0, 100, NULL);
    }
    double elapsed = load_now() - run.start;
    if (run.out) {
        fflush(run.out);
        if (run.out != stdout)
            fclose(run.out);
    }
    load_summary(&run, elapsed);
    for (int i = 0; i < run.o.concurrency; i++) {
        if (slots[i].e)
            curl_easy_cleanup(slots[i].e);
        curl_slist_free_all(slots[i].headers);
        free(slots[i].body);
    }
    free(slots);
    curl_multi_cleanup(multi);
    curl_global_cleanup();
    for (int i = 0; i < run.o.nmodels; i++)
        free(run.o.models[i]);
    free(run.o.models);
    free(run.ms);
    return 0;
}
