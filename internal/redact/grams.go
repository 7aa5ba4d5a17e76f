package redact

// gramBits sizes a gramSet: 2^17 bits, 16 KiB, stay in the L1 cache and
// leave a few percent of the positions of ordinary text as false alarms.
const gramBits = 17

// gramSet holds the first three bytes of literals (keywords, credential
// prefixes, secret values), hashed to one bit each. A text position whose
// three bytes miss the set starts no literal, so the scan tests one bit per
// byte and looks closer at a few percent of the positions only.
type gramSet [1 << gramBits / 64]uint64

// gramMul spreads three bytes over the set (Fibonacci hashing).
const gramMul = 0x9e3779b1

func gramHash(a, b, c byte) uint32 {
	return (uint32(a)<<16 | uint32(b)<<8 | uint32(c)) * gramMul >> (32 - gramBits)
}

// add adds lit's first three bytes, in every case when fold is set. A
// two-byte literal is followed by any byte of third (every byte when nil).
func (g *gramSet) add(lit string, fold bool, third *byteClass) {
	variants := func(i int) []byte {
		if i == 2 && len(lit) == 2 {
			var all []byte
			for b := range 256 {
				if third == nil || third.has(byte(b)) {
					all = append(all, byte(b))
				}
			}
			return all
		}
		if fold {
			return caseVariants(lit[i])
		}
		return []byte{lit[i]}
	}
	for _, a := range variants(0) {
		for _, b := range variants(1) {
			for _, c := range variants(2) {
				h := gramHash(a, b, c)
				g[h/64] |= 1 << (h % 64)
			}
		}
	}
}
