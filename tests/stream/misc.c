#include "suites.h"
CU_TestInfo st_tests_misc[] = {CU_TEST_INFO_NULL};
