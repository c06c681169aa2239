#include "suites.h"
CU_TestInfo st_tests_bad_input[] = {CU_TEST_INFO_NULL};
