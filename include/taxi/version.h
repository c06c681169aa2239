/* SPDX-License-Identifier: Apache-2.0 */
/*
 * taxi/version.h - the version of the taxi headers, and of the library.
 *
 * The one place the version is written: configure reads
 * TAXI_VERSION_STRING from here (AC_INIT), so the package, taxi.pc and the
 * library agree with the headers.
 */
#ifndef TAXI_VERSION_H
#define TAXI_VERSION_H

#include "platform.h"

#define TAXI_VERSION_MAJOR 0        /* incompatible changes */
#define TAXI_VERSION_MINOR 1        /* additions */
#define TAXI_VERSION_PATCH 0        /* fixes */
#define TAXI_VERSION_STRING "0.1.0" /* the three, as text */

#ifdef __cplusplus
extern "C" {
#endif

/*
 * taxi_version - the version of the library actually linked, as
 * (major << 16) | (minor << 8) | patch; compare with the TAXI_VERSION_*
 * macros to detect a header/library mismatch.  Threads: any.
 */
TAXI_EXTERN unsigned taxi_version(void);

/* taxi_version_string - the same as a static string, e.g. "0.1.0". */
TAXI_EXTERN const char *taxi_version_string(void);

#ifdef __cplusplus
}
#endif

#endif /* TAXI_VERSION_H */
