/* test_main: the main() every unit test has: its cmocka tests (cmocka_unit_test(...), ...) run as
 * one group. Part of the test-support library (test/support); include after cmocka.h. */
#ifndef MP_TEST_MAIN_H
#define MP_TEST_MAIN_H

#define TEST_MAIN(...)                                                                             \
    int main(void)                                                                                 \
    {                                                                                              \
        const struct CMUnitTest tests[] = {__VA_ARGS__};                                           \
        return cmocka_run_group_tests(tests, NULL, NULL);                                          \
    }

#endif
