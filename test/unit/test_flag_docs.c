/* Holds what is written about the flags elsewhere to the binaries' flag tables (option_table.c):
 * the docs' flag table of each program lists every flag with the default and environment variable
 * --help gives, and no flag the program lacks; the chart's and config/'s Deployments and the
 * chart README's values table pass only flags their program has, and where the chart says what an
 * empty value leaves a flag at, it says the flag's default. Each check is also shown to find a
 * drift made on purpose. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "test_main.h"

#include "app/options.h"

/* The page that holds both flag tables, each between <!-- flags:PROGRAM:begin/end --> lines. */
static const char *const flag_docs = "docs/configuration.md";
/* The chart's values table (between <!-- helm-values:begin/end -->): a row whose value starts
 * with "router." speaks of the router's flags, any other of the operator's. */
static const char *const chart_readme = "charts/modelpool-operator/README.md";
/* The chart's values, whose comments say what an empty value leaves a flag at. */
static const char *const chart_values = "charts/modelpool-operator/values.yaml";

static const struct {
    app_program program;
    const char *name;
    const char *deployments[2]; /* whose container args ("- --flag...") are this program's */
} programs[] = {
    {APP_OPERATOR,
     "modelpool-operator",
     {"charts/modelpool-operator/templates/deployment.yaml", "config/manager/manager.yaml"}},
    {APP_ROUTER,
     "modelpool-router",
     {"charts/modelpool-operator/templates/router_deployment.yaml",
      "config/router/deployment.yaml"}},
};

/* The file at path (from the source tree) as one string; the caller frees it. */
static char *slurp(const char *path)
{
    char full[512];
    snprintf(full, sizeof(full), "%s/%s", MP_SOURCE_DIR, path);
    FILE *f = fopen(full, "r");
    if (!f)
        fail_msg("cannot read %s", full);
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    assert_non_null(out);
    int c;
    while ((c = fgetc(f)) != EOF)
        fputc(c, out);
    fclose(f);
    assert_int_equal(fclose(out), 0);
    return text;
}

/* The lines of text strictly between the lines begin and end; NULL when begin is missing. */
static const char *section(const char *text, const char *begin, const char *end, size_t *len)
{
    const char *b = strstr(text, begin);
    if (!b)
        return NULL;
    b = strchr(b, '\n');
    const char *e = b ? strstr(b, end) : NULL;
    if (!e)
        return NULL;
    *len = (size_t)(e - b);
    return b;
}

static const app_flag *flag_named(app_program program, const char *name, size_t len)
{
    size_t n;
    const app_flag *t = app_flags(program, &n);
    for (size_t i = 0; i < n; i++)
        if (strlen(t[i].name) == len && strncmp(t[i].name, name, len) == 0)
            return &t[i];
    return NULL;
}

/* The next "--name" in s (up to end) and its length; NULL when none. */
static const char *next_flag(const char *s, const char *end, size_t *len)
{
    for (; s && s + 2 < end; s++)
        if (s[0] == '-' && s[1] == '-' && s[2] >= 'a' && s[2] <= 'z') {
            *len = strspn(s + 2, "abcdefghijklmnopqrstuvwxyz-");
            return s + 2;
        }
    return NULL;
}

/* Each "--name" in s up to end must be a flag of program; the problems found. */
static int known_flags(app_program program, const char *s, const char *end, const char *where)
{
    int problems = 0;
    size_t len;
    for (const char *f = next_flag(s, end, &len); f; f = next_flag(f + len, end, &len))
        if (!flag_named(program, f, len)) {
            print_message("%s: --%.*s is not a flag of %s\n", where, (int)len, f,
                          programs[program].name);
            problems++;
        }
    return problems;
}

/* Cell i of the Markdown table row line (its text without backticks, "\|" read as "|",
 * trimmed) into buf. */
static void cell(const char *line, const char *eol, int i, char *buf, size_t size)
{
    const char *p = line + 1;
    for (; i > 0 && p < eol; p++)
        if (*p == '|' && p[-1] != '\\')
            i--;
    size_t k = 0;
    for (; p < eol && !(*p == '|' && p[-1] != '\\') && k + 1 < size; p++)
        if (*p != '`' && !(*p == '\\' && p[1] == '|') && (k || *p != ' '))
            buf[k++] = *p;
    while (k && buf[k - 1] == ' ')
        k--;
    buf[k] = '\0';
}

/* The docs row of flag f in table (len bytes): its first line naming `--NAME`, else NULL. */
static const char *row_of(const app_flag *f, const char *table, size_t len, const char **eol)
{
    char spelled[64];
    snprintf(spelled, sizeof(spelled), "`--%s", f->name);
    for (const char *line = table; line < table + len; line = *eol + 1) {
        *eol = strchr(line, '\n');
        char *hit = strstr(line, spelled);
        char after = hit ? hit[strlen(spelled)] : '\0';
        if (hit && hit < *eol && (after == '`' || after == ' ' || after == '['))
            return line;
    }
    return NULL;
}

/* program's docs table in text against its flag table: problems found, each printed. */
static int check_docs(app_program program, const char *text)
{
    char begin[64], end[64];
    snprintf(begin, sizeof(begin), "<!-- flags:%s:begin -->", programs[program].name);
    snprintf(end, sizeof(end), "<!-- flags:%s:end -->", programs[program].name);
    size_t len, n;
    const char *table = section(text, begin, end, &len);
    if (!table) {
        print_message("%s: no %s ... %s\n", flag_docs, begin, end);
        return 1;
    }
    int problems = known_flags(program, table, table + len, flag_docs);
    const app_flag *t = app_flags(program, &n);
    for (size_t i = 0; i < n; i++) {
        const char *eol, *line = row_of(&t[i], table, len, &eol);
        char shown[256], env[128];
        if (t[i].kind == APP_FLAG_SWITCH)
            continue;
        if (!line) {
            print_message("%s: %s's table has no row for --%s\n", flag_docs, programs[program].name,
                          t[i].name);
            problems++;
            continue;
        }
        cell(line, eol, 2, shown, sizeof(shown));
        cell(line, eol, 1, env, sizeof(env));
        const char *want = app_flag_shown(&t[i]) ? app_flag_shown(&t[i]) : "";
        if (strcmp(shown, want) != 0) {
            print_message("%s: --%s's default is '%s'; %s --help says '%s'\n", flag_docs, t[i].name,
                          shown, programs[program].name, want);
            problems++;
        }
        if (t[i].env && strncmp(env, t[i].env, strlen(t[i].env)) != 0) {
            print_message("%s: --%s's environment variable is '%s'; %s reads %s\n", flag_docs,
                          t[i].name, env, programs[program].name, t[i].env);
            problems++;
        }
    }
    return problems;
}

/* The "- --flag" container arguments in a Deployment's text: problems found. */
static int check_args(app_program program, const char *text, const char *where)
{
    int problems = 0;
    for (const char *line = text; *line;) {
        const char *eol = line + strcspn(line, "\n");
        const char *p = line + strspn(line, " ");
        if (strncmp(p, "- --", 4) == 0) {
            size_t len;
            const char *f = next_flag(p, eol, &len);
            problems += known_flags(program, f - 2, f + len, where);
        }
        line = *eol ? eol + 1 : eol;
    }
    return problems;
}

/* A flag of either program with a default. */
static const app_flag *defaulted_flag(const char *name, size_t len)
{
    const app_flag *f = flag_named(APP_OPERATOR, name, len);
    f = f ? f : flag_named(APP_ROUTER, name, len);
    return f && f->value ? f : NULL;
}

/* A text about a chart value (a row of the values table, a comment in values.yaml) that names
 * one flag with a default and says what "empty" leaves it at must say that default. */
static int check_empty_default(const char *s, const char *end, const char *where)
{
    const app_flag *named = NULL;
    size_t len;
    for (const char *f = next_flag(s, end, &len); f; f = next_flag(f + len, end, &len)) {
        const app_flag *d = defaulted_flag(f, len);
        if (named && d && d != named)
            return 0; /* more than one: the text is not about one flag's default */
        named = d ? d : named;
    }
    const char *e = named ? strstr(s, "mpty") : NULL;
    if (!e || e >= end)
        return 0;
    for (const char *v = strstr(e, named->value); v && v < end; v = strstr(v + 1, named->value)) {
        char after = v[strlen(named->value)];
        if (v[-1] != '-' && (after < 'a' || after > 'z') && (after < '0' || after > '9'))
            return 0;
    }
    print_message("%s: '%.*s' does not say --%s's default, %s\n", where, (int)(end - s), s,
                  named->name, named->value);
    return 1;
}

/* values.yaml: each block of comment lines. */
static int check_values_comments(const char *text)
{
    int problems = 0;
    const char *block = NULL;
    for (const char *line = text; *line;) {
        const char *eol = line + strcspn(line, "\n");
        bool comment = line[strspn(line, " ")] == '#';
        if (comment && !block)
            block = line;
        if (!comment && block) {
            problems += check_empty_default(block, line, chart_values);
            block = NULL;
        }
        line = *eol ? eol + 1 : eol;
    }
    return problems;
}

/* The chart README's values table: the flags each row names. */
static int check_values_table(const char *text)
{
    size_t len;
    const char *table =
        section(text, "<!-- helm-values:begin -->", "<!-- helm-values:end -->", &len);
    if (!table) {
        print_message("%s: no values table\n", chart_readme);
        return 1;
    }
    int problems = 0;
    for (const char *line = table + 1; line < table + len;) {
        const char *eol = strchr(line, '\n');
        app_program program = strncmp(line, "| `router.", 10) == 0 ? APP_ROUTER : APP_OPERATOR;
        problems += known_flags(program, line, eol, chart_readme);
        problems += check_empty_default(line, eol, chart_readme);
        line = eol + 1;
    }
    return problems;
}

static void test_docs_tables(void **state)
{
    (void)state;
    char *text = slurp(flag_docs);
    int problems = check_docs(APP_OPERATOR, text) + check_docs(APP_ROUTER, text);
    free(text);
    assert_int_equal(problems, 0);
}

static void test_chart_and_config_args(void **state)
{
    (void)state;
    int problems = 0;
    for (size_t p = 0; p < sizeof(programs) / sizeof(*programs); p++)
        for (size_t d = 0; d < 2; d++) {
            char *text = slurp(programs[p].deployments[d]);
            problems += check_args(programs[p].program, text, programs[p].deployments[d]);
            free(text);
        }
    char *text = slurp(chart_readme);
    problems += check_values_table(text);
    free(text);
    text = slurp(chart_values);
    problems += check_values_comments(text);
    free(text);
    assert_int_equal(problems, 0);
}

/* text with its first from replaced by to; the caller frees it. */
static char *edited(const char *text, const char *from, const char *to)
{
    const char *at = strstr(text, from);
    assert_non_null(at);
    char *out = NULL;
    assert_true(asprintf(&out, "%.*s%s%s", (int)(at - text), text, to, at + strlen(from)) > 0);
    return out;
}

/* Each check finds a drift made on purpose: a default changed, a row gone, a row more, a chart
 * argument or example that is no flag. */
static void test_drift_found(void **state)
{
    (void)state;
    char *text = slurp(flag_docs);
    static const struct {
        app_program program;
        const char *from, *to;
    } drifts[] = {
        {APP_OPERATOR, "| `--probe-timeout DURATION` | | `2s` |",
         "| `--probe-timeout DURATION` | | `3s` |"},
        {APP_ROUTER, "| `--header-timeout DURATION` |", "| `--header-timeout-ms DURATION` |"},
        {APP_ROUTER, "| `--bind-address ADDR` |",
         "| `--leader-elect` | | false | |\n| `--bind-address ADDR` |"},
        {APP_OPERATOR, "| `--log-format text\\|json` | `LOG_FORMAT` |",
         "| `--log-format text\\|json` | `LOGFORMAT` |"},
    };
    for (size_t i = 0; i < sizeof(drifts) / sizeof(*drifts); i++) {
        char *bad = edited(text, drifts[i].from, drifts[i].to);
        assert_true(check_docs(drifts[i].program, bad) > 0);
        free(bad);
    }
    free(text);
    assert_int_equal(check_args(APP_ROUTER, "          - --bind-address=:8080\n", "a"), 0);
    assert_int_equal(check_args(APP_OPERATOR, "          - --bind-address=:8080\n", "a"), 1);
    assert_int_equal(check_args(APP_ROUTER, "  - --leader-elect\n  - --x={{ . }}\n", "a"), 2);
    text = slurp(chart_readme);
    char *bad = edited(text, "extraArgs=[\"--leader-election-namespace",
                       "extraArgs=[\"--leader-election-ns");
    assert_int_equal(check_values_table(bad), 1);
    free(bad);
    bad = edited(text, "empty: 30s", "empty: 20s");
    assert_int_equal(check_values_table(bad), 1);
    free(bad);
    free(text);
    text = slurp(chart_values);
    bad = edited(text, "router's default, 128Mi", "router's default, 64Mi");
    assert_int_equal(check_values_comments(bad), 1);
    free(bad);
    free(text);
}

TEST_MAIN(cmocka_unit_test(test_docs_tables), cmocka_unit_test(test_chart_and_config_args),
          cmocka_unit_test(test_drift_found))
