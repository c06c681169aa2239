/* SPDX-License-Identifier: Apache-2.0 */
/* tests/win32/include/netinet/in.h - for the Windows build of the tests: the
 * definitions the tests use from <netinet/in.h> come from tests/win32/compat.h.
 */
#include "../../compat.h"
