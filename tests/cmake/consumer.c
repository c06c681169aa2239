/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/cmake/consumer.c - the smallest program against an installed taxi,
 * built by CMake (tests/cmake/CMakeLists.txt): a reactor made and
 * destroyed, and the version of the headers checked against the library's.
 */
#include <taxi/taxi.h>

#include <stdio.h>
#include <string.h>

int main(void) {
  taxi_reactor_t *r;
  int rc = taxi_reactor_create(&r, NULL);
  if (rc < 0) {
    fprintf(stderr, "taxi_reactor_create: %s\n", taxi_strerror(rc));
    return 1;
  }
  printf("taxi %s on %s\n", taxi_version_string(), taxi_reactor_backend(r));
  if (strcmp(taxi_version_string(), TAXI_VERSION_STRING) != 0) {
    fprintf(stderr, "headers %s, library %s\n", TAXI_VERSION_STRING,
            taxi_version_string());
    return 1;
  }
  return taxi_reactor_destroy(r) == 0 ? 0 : 1;
}
