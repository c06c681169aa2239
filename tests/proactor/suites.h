/* tests/proactor/suites.h: being written */
