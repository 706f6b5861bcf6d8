// This file owns the parser of the ELF auxiliary vector (/proc/self/auxv): pairs of native
// words, type then value, ending with AT_NULL. Only used for AT_CLKTCK (sys_linux.go).

package cotenant

import (
	"encoding/binary"
	"unsafe"
)

// atClkTck is AT_CLKTCK of <elf.h>: the auxiliary-vector entry holding sysconf(_SC_CLK_TCK).
// Here rather than in sys_linux.go so that the parser's tests build on every platform.
const atClkTck = 17

// parseAuxv returns the value of entry typ, or 0 when it is absent.
func parseAuxv(b []byte, typ uint64) uint64 {
	word := int(unsafe.Sizeof(uintptr(0)))
	read := func(p []byte) uint64 {
		if word == 8 {
			return binary.NativeEndian.Uint64(p)
		}
		return uint64(binary.NativeEndian.Uint32(p))
	}
	for i := 0; i+2*word <= len(b); i += 2 * word {
		t, v := read(b[i:]), read(b[i+word:])
		if t == 0 {
			break
		}
		if t == typ {
			return v
		}
	}
	return 0
}
