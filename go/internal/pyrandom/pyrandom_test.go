package pyrandom

import (
	"encoding/hex"
	"slices"
	"testing"
)

// Vectors printed by CPython 3.11: random.Random(seed).randbytes(10), .randbytes(3), .getrandbits(32).
func TestSameStreamAsCPython(t *testing.T) {
	cases := []struct {
		seed          int64
		ten, three    string
		thirtyTwoBits uint32
	}{
		{0, "cd072cd8be6f9f6209c2", "06e7e3", 1806341205},
		{1, "f5b165224a58b791f1d8", "3e61cd", 3280387012},
		{7, "38b4e652e44da7f29e26", "271365", 2795742288},
		{-3, "fd3feb3c9250b797528b", "636321", 1588945316},
		{1<<40 + 5, "24111f813cf75484c344", "afeea9", 3976222944},
		{1<<63 - 1, "9fa30f51c89413a89aa1", "a7f721", 3451239204},
	}

	for _, c := range cases {
		r := New(c.seed)
		ten, three := make([]byte, 10), make([]byte, 3)
		r.Fill(ten)
		r.Fill(three)
		if hex.EncodeToString(ten) != c.ten || hex.EncodeToString(three) != c.three || r.Bits(32) != c.thirtyTwoBits {
			t.Errorf("seed %d: got %x %x, want %s %s", c.seed, ten, three, c.ten, c.three)
		}
	}
}

func TestTheMostNegativeSeedIsItsMagnitude(t *testing.T) {
	// random.Random(-2**63).randbytes(5): seeded from |seed| = 2**63, which int64 cannot hold.
	got := make([]byte, 5)
	New(-1 << 63).Fill(got)
	if hex.EncodeToString(got) != "08d1af8d64" {
		t.Errorf("got %x", got)
	}
}

func TestShuffleAsCPython(t *testing.T) {
	// random.Random(5).shuffle(list(range(10)))
	items := []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}
	New(5).Shuffle(len(items), func(i, j int) { items[i], items[j] = items[j], items[i] })
	if want := []int{2, 3, 1, 0, 8, 7, 6, 5, 4, 9}; !slices.Equal(items, want) {
		t.Errorf("got %v, want %v", items, want)
	}
}

func TestEmptyFillDrawsNothing(t *testing.T) {
	a, b := New(1), New(1)
	a.Fill(nil)
	if a.Uint32() != b.Uint32() {
		t.Error("randbytes(0) consumed output")
	}
}
