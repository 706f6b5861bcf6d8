// This file owns CPU lists ("0-3,7") as the kernel prints them in
// /sys/devices/system/cpu/online, cpuset.effective_cpus, cpuset.cpus.effective and
// Cpus_allowed_list, and CPUSet, the set they describe. Port of
// crates/cotenant/src/procfs/cpulist.rs.

package cotenant

import (
	"fmt"
	"iter"
	"math/bits"
	"strconv"
	"strings"
)

// MaxCPUID is the highest CPU id accepted. Linux's NR_CPUS tops out at 8192; the margin keeps
// future hosts working while stopping a corrupt list from allocating gigabytes.
const MaxCPUID = 1<<16 - 1

const cpuListFormat = "CPU list"

// CPUSet is a set of CPU ids. The zero value is the empty set.
type CPUSet struct {
	words []uint64 // CPU i is bit i%64 of words[i/64]; no trailing zero words
}

// Add adds CPU id; ids outside [0, MaxCPUID] are ignored.
func (s *CPUSet) Add(id int) {
	if id < 0 || id > MaxCPUID {
		return
	}
	w := id / 64
	for len(s.words) <= w {
		s.words = append(s.words, 0)
	}
	s.words[w] |= 1 << (id % 64)
}

// Contains reports whether CPU id is in the set.
func (s CPUSet) Contains(id int) bool {
	w := id / 64
	return id >= 0 && w < len(s.words) && s.words[w]&(1<<(id%64)) != 0
}

// Count is the number of CPUs in the set.
func (s CPUSet) Count() int {
	n := 0
	for _, w := range s.words {
		n += bits.OnesCount64(w)
	}
	return n
}

// IsEmpty reports whether the set has no CPU.
func (s CPUSet) IsEmpty() bool { return s.Count() == 0 }

// Intersection is the set of CPUs in both s and o.
func (s CPUSet) Intersection(o CPUSet) CPUSet {
	n := min(len(s.words), len(o.words))
	words := make([]uint64, n)
	for i := range n {
		words[i] = s.words[i] & o.words[i]
	}
	return CPUSet{words: trimZeroWords(words)}
}

// Equal reports whether both sets hold the same CPUs.
func (s CPUSet) Equal(o CPUSet) bool {
	a, b := trimZeroWords(s.words), trimZeroWords(o.words)
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// All yields the CPU ids in increasing order.
func (s CPUSet) All() iter.Seq[int] {
	return func(yield func(int) bool) {
		for i, w := range s.words {
			for w != 0 {
				b := bits.TrailingZeros64(w)
				if !yield(i*64 + b) {
					return
				}
				w &^= 1 << b
			}
		}
	}
}

// String formats the set as the kernel does ("0-3,7"); the empty set is "".
func (s CPUSet) String() string {
	var b strings.Builder
	lo, hi := -1, -1
	flush := func() {
		if lo < 0 {
			return
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		if lo == hi {
			fmt.Fprintf(&b, "%d", lo)
		} else {
			fmt.Fprintf(&b, "%d-%d", lo, hi)
		}
	}
	for id := range s.All() {
		if lo >= 0 && hi+1 == id {
			hi = id
			continue
		}
		flush()
		lo, hi = id, id
	}
	flush()
	return b.String()
}

// cpuSetFromMask builds a set from a mask laid out as sched_getaffinity(2) fills it.
func cpuSetFromMask(words []uint64) CPUSet {
	n := min(len(words), (MaxCPUID+1)/64)
	return CPUSet{words: trimZeroWords(append([]uint64(nil), words[:n]...))}
}

func trimZeroWords(w []uint64) []uint64 {
	for len(w) > 0 && w[len(w)-1] == 0 {
		w = w[:len(w)-1]
	}
	return w
}

// ParseCPUList parses a kernel CPU list: comma-separated ids and inclusive ranges ("0-3,7").
// Surrounding white space and an empty list (an empty cpuset) are allowed.
func ParseCPUList(text string) (CPUSet, error) {
	var set CPUSet
	body := strings.TrimSpace(text)
	if body == "" {
		return set, nil
	}
	for item := range strings.SplitSeq(body, ",") {
		rng := strings.TrimSpace(item)
		var lo, hi int
		var err error
		if l, h, ok := strings.Cut(rng, "-"); ok {
			if lo, err = parseCPUID(l, text); err != nil {
				return CPUSet{}, err
			}
			if hi, err = parseCPUID(h, text); err != nil {
				return CPUSet{}, err
			}
		} else {
			if lo, err = parseCPUID(rng, text); err != nil {
				return CPUSet{}, err
			}
			hi = lo
		}
		if lo > hi {
			return CPUSet{}, newParseError(cpuListFormat, fmt.Sprintf("range %d-%d is reversed", lo, hi), text)
		}
		for id := lo; id <= hi; id++ {
			set.Add(id)
		}
	}
	return set, nil
}

func parseCPUID(s, text string) (int, error) {
	s = strings.TrimSpace(s)
	if s == "" || !allDigits(s) {
		return 0, newParseError(cpuListFormat, fmt.Sprintf("%q is not a CPU id", s), text)
	}
	id, err := strconv.ParseUint(s, 10, 32)
	if err != nil || id > MaxCPUID {
		return 0, newParseError(cpuListFormat,
			fmt.Sprintf("CPU id %s exceeds the supported maximum %d", s, MaxCPUID), text)
	}
	return int(id), nil
}
