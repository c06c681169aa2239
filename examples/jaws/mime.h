/* SPDX-License-Identifier: Apache-2.0 */
/*
 * examples/jaws/mime.h - the Content-Type of a file from its extension.
 */
#ifndef JAWS_MIME_H
#define JAWS_MIME_H

/* A static string; "application/octet-stream" for unknown extensions. */
const char *mime_type(const char *path);

#endif /* JAWS_MIME_H */
