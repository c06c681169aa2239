#include "suites.h"
CU_TestInfo st_tests_flow[] = {CU_TEST_INFO_NULL};
