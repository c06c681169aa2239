/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/common/version.c - the version of the library actually linked.
 */
#include "config.h"

#include "taxi/version.h"

unsigned taxi_version(void) {
  return ((unsigned)TAXI_VERSION_MAJOR << 16) |
         ((unsigned)TAXI_VERSION_MINOR << 8) | (unsigned)TAXI_VERSION_PATCH;
}

const char *taxi_version_string(void) { return TAXI_VERSION_STRING; }
