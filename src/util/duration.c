/* duration: reads a Go duration number by number, unit by unit (the longest unit that matches),
 * summing in double and refusing anything past 1e15 ms rather than overflowing. */
#include "util/duration.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>

int duration_parse_ms(const char *s, int64_t *out_ms)
{
    static const struct {
        const char *unit;
        double ms;
    } units[] = {{"ns", 1e-6}, {"us", 1e-3}, {"\xc2\xb5s", 1e-3}, {"\xce\xbcs", 1e-3},
                 {"ms", 1},    {"s", 1e3},   {"m", 6e4},          {"h", 3.6e6}};
    if (s == NULL || out_ms == NULL)
        return -EINVAL;
    if (*s == '+')
        s++;
    if (strcmp(s, "0") == 0) {
        *out_ms = 0;
        return 0;
    }
    if (*s == '\0')
        return -EINVAL;
    double total = 0;
    while (*s) {
        double v = 0, scale = 1;
        bool digits = false, frac = false;
        for (; (*s >= '0' && *s <= '9') || (*s == '.' && !frac); s++) {
            if (*s == '.') {
                frac = true;
                continue;
            }
            digits = true;
            if (frac)
                v += (*s - '0') * (scale /= 10);
            else
                v = v * 10 + (*s - '0');
            if (v > 1e15)
                return -EINVAL;
        }
        if (!digits)
            return -EINVAL;
        size_t u = 0, ulen = 0;
        for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
            size_t l = strlen(units[i].unit);
            if (strncmp(s, units[i].unit, l) == 0 && l > ulen) {
                u = i;
                ulen = l;
            }
        }
        if (ulen == 0)
            return -EINVAL;
        s += ulen;
        total += v * units[u].ms;
        if (total > 1e15)
            return -EINVAL;
    }
    *out_ms = (int64_t)total;
    return 0;
}
