#include "suites.h"
CU_TestInfo st_tests_connect[] = {CU_TEST_INFO_NULL};
