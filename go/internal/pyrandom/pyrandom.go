// Package pyrandom is CPython's random.Random (MT19937, seeded from an int) for the few calls
// labkit's echo makes with a seed: randbytes, shuffle and getrandbits. With it a seeded Go
// client sends the same payload bytes in the same order as the Python one, and `labkit-go
// upload-file` writes the same file, so an experiment that swaps implementations swaps only
// the gRPC stack, never the data.
package pyrandom

const (
	n         = 624
	m         = 397
	matrixA   = 0x9908b0df
	upperMask = 0x80000000
	lowerMask = 0x7fffffff
)

// Rand is one generator, as random.Random(seed).
type Rand struct {
	mt    [n]uint32
	index int
}

// New seeds a generator as random.Random(seed) does for an int: init_by_array over the 32-bit
// words of |seed|, least significant first.
func New(seed int64) *Rand {
	magnitude := uint64(seed)
	if seed < 0 {
		magnitude = uint64(-seed) // -MinInt64 wraps to itself, which as uint64 is |MinInt64|
	}
	key := []uint32{uint32(magnitude)}
	if high := uint32(magnitude >> 32); high != 0 {
		key = append(key, high)
	}
	r := &Rand{}
	r.initByArray(key)
	return r
}

func (r *Rand) initGenrand(s uint32) {
	r.mt[0] = s
	for i := 1; i < n; i++ {
		r.mt[i] = 1812433253*(r.mt[i-1]^(r.mt[i-1]>>30)) + uint32(i)
	}
	r.index = n
}

func (r *Rand) initByArray(key []uint32) {
	r.initGenrand(19650218)
	i, j := 1, 0
	for k := max(n, len(key)); k > 0; k-- {
		r.mt[i] = (r.mt[i] ^ ((r.mt[i-1] ^ (r.mt[i-1] >> 30)) * 1664525)) + key[j] + uint32(j)
		i, j = i+1, j+1
		if i >= n {
			r.mt[0], i = r.mt[n-1], 1
		}
		if j >= len(key) {
			j = 0
		}
	}
	for k := n - 1; k > 0; k-- {
		r.mt[i] = (r.mt[i] ^ ((r.mt[i-1] ^ (r.mt[i-1] >> 30)) * 1566083941)) - uint32(i)
		i++
		if i >= n {
			r.mt[0], i = r.mt[n-1], 1
		}
	}
	r.mt[0] = 0x80000000
}

// Uint32 is the next 32-bit output (genrand_uint32).
func (r *Rand) Uint32() uint32 {
	if r.index >= n {
		r.twist()
	}
	y := r.mt[r.index]
	r.index++
	y ^= y >> 11
	y ^= (y << 7) & 0x9d2c5680
	y ^= (y << 15) & 0xefc60000
	return y ^ (y >> 18)
}

func (r *Rand) twist() {
	for i := 0; i < n; i++ {
		y := (r.mt[i] & upperMask) | (r.mt[(i+1)%n] & lowerMask)
		next := r.mt[(i+m)%n] ^ (y >> 1)
		if y&1 != 0 {
			next ^= matrixA
		}
		r.mt[i] = next
	}
	r.index = 0
}

// Bits is getrandbits(k) for 0 <= k <= 32.
func (r *Rand) Bits(k int) uint32 {
	if k == 0 {
		return 0
	}
	return r.Uint32() >> (32 - k)
}

// Fill is randbytes(len(p)): getrandbits(8·len) as little-endian bytes. Python fills that number
// from 32-bit words, least significant first, and keeps the high bits of a last partial word.
func (r *Rand) Fill(p []byte) {
	for len(p) >= 4 {
		word := r.Uint32()
		p[0], p[1], p[2], p[3] = byte(word), byte(word>>8), byte(word>>16), byte(word>>24)
		p = p[4:]
	}
	if len(p) > 0 {
		word := r.Uint32() >> (32 - 8*len(p))
		for i := range p {
			p[i] = byte(word >> (8 * i))
		}
	}
}

// below is _randbelow(limit): the bits of limit, redrawn until under it.
func (r *Rand) below(limit int) int {
	k := 0
	for v := limit; v > 0; v >>= 1 {
		k++
	}
	for {
		if v := int(r.Bits(k)); v < limit {
			return v
		}
	}
}

// Shuffle is random.shuffle of a sequence of length size (Fisher-Yates from the end), swapping with swap.
func (r *Rand) Shuffle(size int, swap func(i, j int)) {
	for i := size - 1; i > 0; i-- {
		swap(i, r.below(i+1))
	}
}
