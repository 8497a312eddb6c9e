package slicepool

import "testing"

func TestAnArrayPutBackIsHandedOutAgainEmptyAndCleared(t *testing.T) {
	var p Pool[*int]
	a := p.Get(4)
	if len(a) != 0 || cap(a) < 4 {
		t.Fatalf("Get(4) = len %d cap %d, want an empty slice with room for 4", len(a), cap(a))
	}
	x := 1
	a = append(a, &x, &x, &x)
	p.Put(a)
	// sync.Pool may drop what it holds (a collection, another P); when it
	// hands the array back, it must be empty and cleared.
	b := p.Get(2)
	if len(b) != 0 {
		t.Fatalf("Get after Put = len %d, want 0", len(b))
	}
	if &b[:1][0] == &a[:1][0] {
		for i, e := range b[:cap(b)] {
			if e != nil {
				t.Fatalf("reused array keeps element %d alive", i)
			}
		}
	}
}

func TestAnArrayTooSmallIsGrownToTheRoomAsked(t *testing.T) {
	var p Pool[int]
	for _, n := range []int{1000, 1002, 1004, 3000, 10} {
		b := p.Get(n)
		if len(b) != 0 || cap(b) < n {
			t.Fatalf("Get(%d) = len %d cap %d, want an empty slice with room for %d", n, len(b), cap(b), n)
		}
		p.Put(append(b, 1, 2, 3))
	}
}
