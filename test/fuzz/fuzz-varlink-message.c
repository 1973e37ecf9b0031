/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The varlink message parser and io.systemd.sysext's parameter mapping, on any bytes. */
#include <stdint.h>
#include <stdlib.h>

#include "varlink-message.h"
#include "varlink-sysext.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        VarlinkMessage m = {};
        const char *bad = NULL;
        SysextCall c;
        size_t len = 0;
        char *reply;

        if (varlink_message_parse((const char *) data, size, &m) < 0)
                return 0;
        (void) sysext_call_parse(m.method, m.parameters, m.flags, &c, &bad);
        /* The reply path with what came in: the sender's own parameters back. */
        reply = varlink_format_reply(json_object_get(m.parameters), (m.flags & VARLINK_CALL_MORE) != 0, &len);
        free(reply);
        {
                int e = 0;
                json_object *a = sysext_list_items(m.parameters, 0, &e);
                json_object_put(a);
        }
        varlink_message_done(&m);
        return 0;
}
