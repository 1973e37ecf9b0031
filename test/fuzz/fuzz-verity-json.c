/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The JSON of a verity signature partition ({"rootHash": ..., "signature": base64}). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"
#include "verity.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        _cleanup_free_ char *text = NULL, *hash = NULL, *reason = NULL, *norm = NULL;
        _cleanup_free_ uint8_t *sig = NULL;
        size_t sig_size = 0;

        text = strndup((const char *) data, size);
        if (!text)
                return 0;
        if (verity_parse_signature_json(text, &hash, &sig, &sig_size, &reason) >= 0 && (!hash || strlen(hash) < 32))
                abort();
        (void) verity_normalize_roothash(text, &norm);
        return 0;
}
