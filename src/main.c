/* modelpool-operator: parses flags and wires the pieces together. The controller itself is not
 * wired yet (see README "Status"): today the binary validates its flags and exits. */
#include <stdio.h>
#include <stdlib.h>

#include "app/options.h"

static const char *main_getenv(const char *name)
{
    return getenv(name);
}

int main(int argc, char **argv)
{
    app_options opts;
    char err[256];
    if (app_options_parse(&opts, argc, argv, main_getenv, err, sizeof(err)) < 0) {
        fprintf(stderr, "modelpool-operator: %s\n", err);
        return 2;
    }
    if (opts.help) {
        fputs(app_options_usage(), stdout);
        return 0;
    }
    if (opts.version) {
        printf("modelpool-operator %s\n", MP_VERSION);
        return 0;
    }
    fprintf(stderr, "modelpool-operator: the controller is not wired yet; see README \"Status\"\n");
    return 1;
}
