package chat

import "testing"

func TestUsageSane(t *testing.T) {
	for _, tc := range []struct{ in, want Usage }{
		{Usage{20, 5, 10, 0}, Usage{20, 5, 10, 0}},
		{Usage{20, -5, 0, 0}, Usage{20, 0, 0, 0}},
		{Usage{-1, -1, -1, -1}, Usage{0, 0, 0, 0}},
		{Usage{20, 5, 64, 0}, Usage{20, 5, 20, 0}},
		{Usage{-3, 1, 2, 0}, Usage{0, 1, 0, 0}},
		{Usage{20, 9, 0, 4}, Usage{20, 9, 0, 4}},
		{Usage{20, 9, 0, 30}, Usage{20, 9, 0, 9}},
	} {
		if got := tc.in.Sane(); got != tc.want {
			t.Errorf("%+v.Sane() = %+v, want %+v", tc.in, got, tc.want)
		}
	}
}
