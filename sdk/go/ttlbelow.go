// ttlbelow N: a wasp match, true for IPv4 packets whose TTL is below N and IPv6 packets whose
// hop limit is below N (N in 1..=255, checked in configure). Built into a component by
// build.sh (go build for wasip1 as a reactor, wasm-tools component embed and new).
//
// This file is the plugin: plain Go functions, one per function of the WIT interface
// `wasp:plugin/plugin` (../../wit/plugin.wit). abi.go exports them to the host with the
// component model's canonical ABI; nothing here deals with addresses or layouts.
//
// The packet buffer layout is the one documented at the top of wit/plugin.wit: `count`
// records of `stride` bytes, each a 32-byte little-endian header followed by the first
// `window` bytes of the frame.
package main

import "strconv"

const (
	// window is the bytes of each frame the plugin needs: Ethernet (14), a VLAN tag the
	// device did not pop (4) and the IP header's first 8 or 9 bytes fit in 64.
	window = 64
	// header is the size of a record's header; the frame's bytes follow it.
	header     = 32
	noOffset   = 0xffff
	nfprotoV4  = 2
	nfprotoV6  = 10
	usage      = "usage: ttlbelow N (N in 1..=255)"
	notANumber = "\" is not a number in 1..=255"
)

// limits holds each configured use site's N. Use sites are small integers handed out by
// the host; a site that is not in the map (never configured, or released) matches nothing.
var limits = map[uint32]uint8{}

// describe says what the plugin is: a match that needs the first `window` bytes of a frame.
func describe() Info {
	return Info{Name: "ttlbelow", Version: "0.1.0", Kinds: []Kind{KindMatchExpr}, Window: window}
}

// configure sets use site `site` up with the rule's arguments; the error's text refuses the
// ruleset at the rule's file:line:col.
func configure(site uint32, kind Kind, args []string) error {
	if kind != KindMatchExpr {
		return refusal("ttlbelow is a match")
	}
	if len(args) != 1 {
		return refusal(usage)
	}
	// Decimal digits only: ParseUint also refuses signs, spaces and values over 255.
	n, err := strconv.ParseUint(args[0], 10, 8)
	if err != nil || n < 1 {
		return refusal("ttlbelow: \"" + args[0] + notANumber)
	}
	limits[site] = uint8(n)
	return nil
}

// release forgets use site `site`.
func release(site uint32) { delete(limits, site) }

// matches writes hits[i] = 1 for each packet i of the batch whose TTL / hop limit is below
// the site's N (hits comes zeroed, one byte per packet).
func matches(site uint32, batch []byte, count, stride uint32, hits []byte) {
	limit, ok := limits[site]
	if !ok || stride < header {
		return
	}
	for i := uint32(0); i < count && uint64(i+1)*uint64(stride) <= uint64(len(batch)); i++ {
		if ttlBelow(batch[i*stride:(i+1)*stride], limit) {
			hits[i] = 1
		}
	}
}

// ttlBelow reads one record (header + window). A frame that is not IP, a header the host did
// not find (0xffff) or a field past the captured bytes is a non-match, not a crash.
func ttlBelow(rec []byte, limit uint8) bool {
	l3 := uint32(rec[16]) | uint32(rec[17])<<8
	caplen := uint32(rec[20]) | uint32(rec[21])<<8
	var at uint32
	switch {
	case l3 == noOffset:
		return false
	case rec[23] == nfprotoV4:
		at = l3 + 8 // IPv4 TTL (RFC 791)
	case rec[23] == nfprotoV6:
		at = l3 + 7 // IPv6 hop limit (RFC 8200)
	default:
		return false
	}
	if at >= caplen || header+at >= uint32(len(rec)) {
		return false
	}
	return rec[header+at] < limit
}

// The other functions of the interface, as a plain match has them.

// apply is never called for a match: every packet continues (no verdicts means that).
func apply(site uint32, batch []byte, count, stride uint32) []Verdict { return nil }

func onTimer(key uint64)            {}
func resetState(site, elem uint32)  {}
func exportState() []byte           { return nil }
func importState(blob []byte) error { return refusal("no state transfer") }
