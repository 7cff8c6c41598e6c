/* hex: the value of one hexadecimal digit, for the decoders that read %XX (paths) and \uXXXX (JSON)
 * escapes. Header-only: one small pure function. */
#ifndef MP_UTIL_HEX_H
#define MP_UTIL_HEX_H

/* 0-15, or -1 when c is not a hexadecimal digit (either case). */
static inline int util_hex_digit(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

#endif
