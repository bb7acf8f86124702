// The component model's canonical ABI for the world `wasp-plugin` (../../wit/plugin.wit),
// written by hand: Go has no wit-bindgen of its own in this toolchain. Each function of the
// interface `wasp:plugin/plugin@0.1.3` is a `//go:wasmexport` named
// `wasp:plugin/plugin@0.1.3#NAME`, with the core signature the canonical ABI gives it
// (wasm32: addresses and lengths are i32):
//
//   - u32, enums (kind), bool: i32; u64: i64.
//   - A string or list argument is two i32: its address and its element count. The host
//     writes it into memory it got from our `cabi_realloc` just before the call.
//   - A result that flattens to more than one value (records, strings, lists, results) is
//     returned as the address of a block in our memory that holds it, laid out as below; the
//     host reads it when the call returns.
//
// Memory ownership, the part Go makes different from C: Go's garbage collector owns the
// heap and does not see the host's references into it, so every block the host may still
// read or write is kept reachable from a global here:
//
//   - callArena: what `cabi_realloc` handed out for the arguments of the call in progress,
//     reused by the next call once this one returns.
//   - retained: the previous call's result, until the next call starts (the host copies a
//     result out before it calls us again, so no `cabi_post_*` export is needed).
//   - adapterBlocks: the WASI adapter's own state (`cabi_realloc_adapter`), for the life of
//     the instance.
//
// Only what ttlbelow uses is lowered: `list-state` returns no entries and statement
// results carry no edits (their layouts are written down below for a plugin that needs
// them). The plugin's logic is in ttlbelow.go.
package main

import "unsafe"

// Kind is the WIT enum `types.kind`: what a plugin is used as in a rule.
type Kind uint8

const (
	KindMatchExpr Kind = iota
	KindStatement
	KindStateful
)

// Verdict is the WIT enum `types.verdict`: a statement's verdict for one packet.
type Verdict uint8

const (
	VerdictContinue Verdict = iota
	VerdictAccept
	VerdictDrop
	VerdictReturn
)

// Info is the WIT record `types.info`.
type Info struct {
	Name, Version string
	Kinds         []Kind
	Window        uint32
	StateTransfer bool
}

// refusal is an error whose text the host shows as is: the `string` of `result<_, string>`.
type refusal string

func (r refusal) Error() string { return string(r) }

// main is never called: the module is a reactor (-buildmode=c-shared), whose `_initialize`
// starts the Go runtime and returns; the host then calls the exports.
func main() {}

// abiList is a string or a list as the canonical ABI stores it in memory: the address of
// its first element and the element count (8 bytes, align 4).
type abiList struct{ ptr, len uint32 }

// Result layouts, in Go structs whose fields fall at the canonical ABI's offsets (Go aligns
// uint32 to 4 on wasm, as the ABI does).
var (
	// record info: name @0, version @8, kinds @16 (list<kind>: one byte per enum),
	// window @24, state-transfer @28 (bool: one byte); 32 bytes, align 4.
	infoArea struct {
		name, version, kinds abiList
		window               uint32
		stateTransfer        bool
	}
	// result<_, string>: the case @0 (0 ok, 1 err), the error string @4; 12 bytes.
	resultArea struct {
		isErr uint8
		err   abiList
	}
	// list<u8> (matches, export-state) and list<state-entry> (list-state): 8 bytes.
	listArea abiList
	// record statement-result: verdicts @0 (list<verdict>: one byte each), edits @8
	// (list<edit>: each edit is 20 bytes, align 4: packet @0, offset @4, the edit-op case
	// @8 as a byte, its payload @12: a list<u8> for set and insert, a u32 for remove).
	statementArea struct{ verdicts, edits abiList }
	// A state-entry, for a plugin that lists state: elem @0, values @4 (each a
	// tuple<string, u64>: the string @0, the u64 @8; 16 bytes, align 8), text @12; 20
	// bytes, align 4.

	// retained keeps the Go values a result points into (strings, slices) alive until the
	// next call.
	retained []any
)

// addr is the linear-memory address of p (wasm32: it fits in 32 bits).
func addr(p unsafe.Pointer) uint32 { return uint32(uintptr(p)) }

// lowerString stores s for the host: its bytes are kept alive until the next call.
func lowerString(s string) abiList {
	retained = append(retained, s)
	return abiList{addr(unsafe.Pointer(unsafe.StringData(s))), uint32(len(s))}
}

// lowerBytes stores a list of byte-sized values (list<u8>, list of an enum) for the host.
func lowerBytes(b []byte) abiList {
	if len(b) == 0 {
		return abiList{}
	}
	retained = append(retained, b)
	return abiList{addr(unsafe.Pointer(unsafe.SliceData(b))), uint32(len(b))}
}

// lowerResult stores a result<_, string>: ok for a nil error, else the error's text.
func lowerResult(err error) unsafe.Pointer {
	resultArea.isErr, resultArea.err = 0, abiList{}
	if err != nil {
		resultArea.isErr, resultArea.err = 1, lowerString(err.Error())
	}
	return unsafe.Pointer(&resultArea)
}

// liftBytes is the list<u8> argument at ptr: memory of callArena, valid until the call
// returns (copy what must outlive it).
func liftBytes(ptr unsafe.Pointer, n uint32) []byte {
	if n == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(ptr), n)
}

// liftStrings copies the list<string> argument at ptr (n abiList records) into Go strings.
func liftStrings(ptr unsafe.Pointer, n uint32) []string {
	if n == 0 {
		return nil
	}
	out := make([]string, n)
	for i, s := range unsafe.Slice((*abiList)(ptr), n) {
		out[i] = string(liftBytes(unsafe.Add(unsafe.Pointer(nil), s.ptr), s.len))
	}
	return out
}

// Allocation for the host's arguments: a bump allocator over one reusable slab, so a
// batch costs no garbage. The slab is []uint64 so that its address is 8-aligned, the
// largest alignment of the contract's types.
var (
	callArena []uint64
	callUsed  uintptr // bytes of callArena handed out in the call being prepared
	// callOld keeps slabs replaced by a bigger one reachable until the call returns.
	callOld [][]uint64
)

// cabi_realloc(old, oldSize, align, newSize) is the host's allocator in our memory, for
// the arguments of the next call (the canonical ABI's `realloc`). A block lasts until that
// call returns (see endCall). Growing a block (old != 0) copies it into a new one.
//
//go:wasmexport cabi_realloc
func cabiRealloc(old unsafe.Pointer, oldSize, align, newSize uint32) unsafe.Pointer {
	if align > 8 {
		panic("cabi_realloc: alignment above 8") // no type of the contract has one
	}
	at := (callUsed + uintptr(align) - 1) &^ (uintptr(align) - 1)
	if end := at + uintptr(newSize); end > uintptr(len(callArena))*8 {
		if callUsed > 0 {
			callOld = append(callOld, callArena) // still holds this call's other arguments
		}
		callArena = make([]uint64, max(end, 2*uintptr(len(callArena))*8, 4096)/8+1)
		at = 0
	}
	callUsed = at + uintptr(newSize)
	p := unsafe.Add(unsafe.Pointer(unsafe.SliceData(callArena)), at)
	if old != nil {
		copy(unsafe.Slice((*byte)(p), newSize), unsafe.Slice((*byte)(old), min(oldSize, newSize)))
	}
	return p
}

// adapterArena is the WASI adapter's memory: its state and its stack, handed out by
// cabi_realloc_adapter and never freed. A static array, because the adapter allocates
// during the Go runtime's own start (`_initialize` asks for random bytes and the clock
// through it), before the Go heap can be used.
var (
	adapterArena [adapterArenaSize / 8]uint64
	adapterUsed  uintptr
)

// adapterArenaSize covers what the reactor adapter of wasi-preview1-component-adapter-provider
// 46.0.1 asks for, once each: its state (64 KiB) and its stack (64 KiB, wit-component's
// allocate_stack), with room to spare. The Go heap does not use it: it costs linear memory,
// not file size (it is zero-initialized data, .bss).
const adapterArenaSize = 192 << 10

// cabi_realloc_adapter is the allocator wit-component hands the WASI preview1 adapter for
// its own state, instead of cabi_realloc: it may be called before the Go runtime has started
// (see adapterArena), so it is a nosplit leaf that touches no heap. It returns 0 when the
// arena is exhausted, and never grows a block (the adapter does not ask to).
//
//go:wasmexport cabi_realloc_adapter
//go:nosplit
func cabiReallocAdapter(old unsafe.Pointer, oldSize, align, newSize uint32) unsafe.Pointer {
	base := uintptr(unsafe.Pointer(&adapterArena))
	at := (base + adapterUsed + uintptr(align) - 1) &^ (uintptr(align) - 1)
	if old != nil || at+uintptr(newSize) > base+adapterArenaSize {
		return nil
	}
	adapterUsed = at + uintptr(newSize) - base
	return unsafe.Add(unsafe.Pointer(&adapterArena), at-base)
}

// beginCall drops the previous call's result; endCall frees this call's arguments. Every
// export calls both (endCall deferred).
func beginCall() {
	clear(retained)
	retained = retained[:0]
}

func endCall() {
	callUsed = 0
	clear(callOld)
	callOld = callOld[:0]
}

// The exports of `wasp:plugin/plugin@0.1.3`, in the order of the WIT.

//go:wasmexport wasp:plugin/plugin@0.1.3#describe
func exportDescribe() unsafe.Pointer {
	beginCall()
	info := describe()
	kinds := make([]byte, len(info.Kinds))
	for i, k := range info.Kinds {
		kinds[i] = byte(k)
	}
	infoArea.name = lowerString(info.Name)
	infoArea.version = lowerString(info.Version)
	infoArea.kinds = lowerBytes(kinds)
	infoArea.window = info.Window
	infoArea.stateTransfer = info.StateTransfer
	return unsafe.Pointer(&infoArea)
}

//go:wasmexport wasp:plugin/plugin@0.1.3#configure
func exportConfigure(site, kind uint32, args unsafe.Pointer, nargs uint32) unsafe.Pointer {
	beginCall()
	defer endCall()
	return lowerResult(configure(site, Kind(kind), liftStrings(args, nargs)))
}

//go:wasmexport wasp:plugin/plugin@0.1.3#release
func exportRelease(site uint32) {
	beginCall()
	release(site)
}

// hits is the result buffer of matches, reused from call to call.
var hits []byte

//go:wasmexport wasp:plugin/plugin@0.1.3#matches
func exportMatches(site uint32, batch unsafe.Pointer, n, count, stride uint32) unsafe.Pointer {
	beginCall()
	defer endCall()
	if uint32(cap(hits)) < count {
		hits = make([]byte, count)
	}
	hits = hits[:count]
	clear(hits)
	matches(site, liftBytes(batch, n), count, stride, hits)
	listArea = abiList{addr(unsafe.Pointer(unsafe.SliceData(hits))), count}
	return unsafe.Pointer(&listArea)
}

//go:wasmexport wasp:plugin/plugin@0.1.3#apply
func exportApply(site uint32, batch unsafe.Pointer, n, count, stride uint32) unsafe.Pointer {
	beginCall()
	defer endCall()
	verdicts := apply(site, liftBytes(batch, n), count, stride)
	v := make([]byte, len(verdicts))
	for i, x := range verdicts {
		v[i] = byte(x)
	}
	statementArea.verdicts, statementArea.edits = lowerBytes(v), abiList{}
	return unsafe.Pointer(&statementArea)
}

//go:wasmexport wasp:plugin/plugin@0.1.3#on-timer
func exportOnTimer(key uint64) {
	beginCall()
	onTimer(key)
}

//go:wasmexport wasp:plugin/plugin@0.1.3#list-state
func exportListState(site uint32) unsafe.Pointer {
	beginCall()
	listArea = abiList{} // no entries: ttlbelow keeps no state to list
	return unsafe.Pointer(&listArea)
}

//go:wasmexport wasp:plugin/plugin@0.1.3#reset-state
func exportResetState(site, elem uint32) {
	beginCall()
	resetState(site, elem)
}

//go:wasmexport wasp:plugin/plugin@0.1.3#export-state
func exportExportState() unsafe.Pointer {
	beginCall()
	listArea = lowerBytes(exportState())
	return unsafe.Pointer(&listArea)
}

//go:wasmexport wasp:plugin/plugin@0.1.3#import-state
func exportImportState(blob unsafe.Pointer, n uint32) unsafe.Pointer {
	beginCall()
	defer endCall()
	return lowerResult(importState(liftBytes(blob, n)))
}
