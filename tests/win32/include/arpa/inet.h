/* SPDX-License-Identifier: Apache-2.0 */
/* tests/win32/include/arpa/inet.h - for the Windows build of the tests: the
 * definitions the tests use from <arpa/inet.h> come from tests/win32/compat.h.
 */
#include "../../compat.h"
