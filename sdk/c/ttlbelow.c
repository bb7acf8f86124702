// ttlbelow N: a wasp match, true for IPv4 packets whose TTL is below N and IPv6 packets whose
// hop limit is below N (N in 1..=255, checked in configure). Built into a component by
// build.sh (wit-bindgen c, clang, wasm-tools component new).
//
// The packet buffer layout is the one documented at the top of wit/plugin.wit: `count`
// records of `stride` bytes, each a 32-byte little-endian header followed by the first WINDOW
// bytes of the frame.
//
// Ownership, as wit-bindgen's C bindings have it: arguments (lists, strings) belong to the
// callee, which frees them; results are allocated with malloc and freed by the bindings after
// the host has copied them.

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "wasp_plugin.h"

// Bytes of each frame the plugin needs: Ethernet (14), a VLAN tag the device did not pop (4)
// and the IP header's first 8 or 9 bytes fit in 64.
#define WINDOW 64
#define HEADER 32
#define NO_OFFSET 0xffff
#define NFPROTO_IPV4 2
#define NFPROTO_IPV6 10

// The limit of each use site: sites[i] is site i's limit, 0 when the site is not configured.
// Sites are small integers handed out by the host, so a growing array does.
static uint8_t *limits;
static uint32_t limits_len;

static uint16_t le16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }

// One packet record (header + window): does its TTL / hop limit fall below `limit`?
static bool ttl_below(const uint8_t *rec, uint32_t stride, uint8_t limit) {
    uint16_t l3 = le16(rec + 16);
    uint16_t caplen = le16(rec + 20);
    uint8_t nfproto = rec[23];
    uint32_t at;
    if (l3 == NO_OFFSET) return false;
    if (nfproto == NFPROTO_IPV4)
        at = (uint32_t)l3 + 8; // IPv4 TTL (RFC 791)
    else if (nfproto == NFPROTO_IPV6)
        at = (uint32_t)l3 + 7; // IPv6 hop limit (RFC 8200)
    else
        return false;
    if (at >= caplen || HEADER + at >= stride) return false; // truncated: not there
    return rec[HEADER + at] < limit;
}

// A string result the bindings will free: a malloc'd copy of `s`.
static void set_string(wasp_plugin_string_t *out, const char *s) {
    wasp_plugin_string_dup(out, s);
}

// Append `len` bytes of `s` to the message `msg` of capacity `cap` (no printf: it would pull
// in stdio, and with it WASI imports).
static void append(char *msg, size_t cap, const char *s, size_t len) {
    size_t at = strlen(msg);
    if (len > cap - 1 - at) len = cap - 1 - at;
    memcpy(msg + at, s, len);
    msg[at + len] = 0;
}
#define APPEND_LIT(msg, lit) append(msg, sizeof msg, lit, sizeof(lit) - 1)

void exports_wasp_plugin_plugin_describe(exports_wasp_plugin_plugin_info_t *ret) {
    set_string(&ret->name, "ttlbelow");
    set_string(&ret->version, "0.1.0");
    ret->kinds.len = 1;
    ret->kinds.ptr = malloc(sizeof(*ret->kinds.ptr));
    if (!ret->kinds.ptr) abort();
    ret->kinds.ptr[0] = WASP_PLUGIN_TYPES_KIND_MATCH_EXPR;
    ret->window = WINDOW;
    ret->state_transfer = false;
}

bool exports_wasp_plugin_plugin_configure(uint32_t site, exports_wasp_plugin_plugin_kind_t kind,
                                          wasp_plugin_list_string_t *args,
                                          wasp_plugin_string_t *err) {
    char msg[96] = "";
    bool ok = false;
    unsigned n = 0;
    if (kind != WASP_PLUGIN_TYPES_KIND_MATCH_EXPR) {
        APPEND_LIT(msg, "ttlbelow is a match");
    } else if (args->len != 1) {
        APPEND_LIT(msg, "usage: ttlbelow N (N in 1..=255)");
    } else {
        const wasp_plugin_string_t *a = &args->ptr[0];
        bool digits = a->len >= 1 && a->len <= 3;
        for (size_t i = 0; digits && i < a->len; i++) {
            if (a->ptr[i] < '0' || a->ptr[i] > '9') digits = false;
            else n = n * 10 + (unsigned)(a->ptr[i] - '0');
        }
        if (!digits || n < 1 || n > 255) {
            APPEND_LIT(msg, "ttlbelow: \"");
            append(msg, sizeof msg, (const char *)a->ptr, a->len > 16 ? 16 : a->len);
            APPEND_LIT(msg, "\" is not a number in 1..=255");
        } else {
            ok = true;
        }
    }
    if (ok && site >= limits_len) {
        uint32_t len = site + 1 > 2 * limits_len ? site + 1 : 2 * limits_len;
        uint8_t *grown = realloc(limits, len);
        if (!grown) {
            APPEND_LIT(msg, "ttlbelow: out of memory");
            ok = false;
        } else {
            memset(grown + limits_len, 0, len - limits_len);
            limits = grown;
            limits_len = len;
        }
    }
    if (ok) limits[site] = (uint8_t)n;
    else set_string(err, msg);
    wasp_plugin_list_string_free(args);
    return ok;
}

void exports_wasp_plugin_plugin_release(uint32_t site) {
    if (site < limits_len) limits[site] = 0;
}

void exports_wasp_plugin_plugin_matches(uint32_t site, wasp_plugin_list_u8_t *batch,
                                        uint32_t count, uint32_t stride,
                                        wasp_plugin_list_u8_t *ret) {
    uint8_t limit = site < limits_len ? limits[site] : 0;
    ret->len = count;
    ret->ptr = calloc(count ? count : 1, 1);
    if (!ret->ptr) abort();
    if (limit != 0 && stride >= HEADER) {
        for (uint32_t i = 0; i < count && (size_t)(i + 1) * stride <= batch->len; i++)
            ret->ptr[i] = ttl_below(batch->ptr + (size_t)i * stride, stride, limit);
    }
    wasp_plugin_list_u8_free(batch);
}

// The other exports of the world, with what a plain match does.

void exports_wasp_plugin_plugin_apply(uint32_t site, wasp_plugin_list_u8_t *batch,
                                      uint32_t count, uint32_t stride,
                                      exports_wasp_plugin_plugin_statement_result_t *ret) {
    (void)site;
    (void)stride;
    ret->verdicts.len = count;
    ret->verdicts.ptr = calloc(count ? count : 1, sizeof(*ret->verdicts.ptr)); // 0: continue
    if (!ret->verdicts.ptr) abort();
    ret->edits.len = 0;
    ret->edits.ptr = NULL;
    wasp_plugin_list_u8_free(batch);
}

void exports_wasp_plugin_plugin_on_timer(uint64_t key) { (void)key; }

void exports_wasp_plugin_plugin_list_state(uint32_t site,
                                           exports_wasp_plugin_plugin_list_state_entry_t *ret) {
    (void)site;
    ret->len = 0;
    ret->ptr = NULL;
}

void exports_wasp_plugin_plugin_reset_state(uint32_t site, uint32_t elem) {
    (void)site;
    (void)elem;
}

void exports_wasp_plugin_plugin_export_state(wasp_plugin_list_u8_t *ret) {
    ret->len = 0;
    ret->ptr = NULL;
}

bool exports_wasp_plugin_plugin_import_state(wasp_plugin_list_u8_t *blob,
                                             wasp_plugin_string_t *err) {
    wasp_plugin_list_u8_free(blob);
    set_string(err, "no state transfer");
    return false;
}
