package ollama

import "testing"

func TestSilentTruncation(t *testing.T) {
	tests := map[string]struct {
		estimated, numCtx, reported int
		wantTooLong                 bool
	}{
		// 10000 estimated > 8192 × 1.1 = 9011, server read 8100 < 9000 (90%).
		"cut to the window": {10000, 8192, 8100, true},
		// Message-level dropping can leave far less than num_ctx.
		"cut by dropping messages": {10000, 8192, 2100, true},
		// Estimated a little over num_ctx (within the 10% slack): the
		// estimator may be wrong and the prompt may fit; a low count here
		// may be the prompt cache.
		"estimate within slack, cached": {8500, 8192, 40, false},
		// Fits: whatever the count (cache), nothing to say.
		"fits, cached":     {3000, 8192, 12, false},
		"fits, read whole": {3000, 8192, 3010, false},
		// Way over num_ctx, but the server read about all of it: it did not
		// cut (num_ctx ignored, or the estimate is off). Believe it.
		"server read it all": {20000, 8192, 19000, false},
		"no estimate":        {0, 8192, 100, false},
		// Ollama 0.17.4 cut a 3009-token prompt to exactly num_ctx 2048 and
		// reported 2048: a cut even where the estimate said it fits.
		"count is num_ctx, estimate under": {1900, 2048, 2048, true},
		"count is num_ctx, no estimate":    {0, 2048, 2048, true},
		"no window":                        {20000, 0, 100, false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			e := silentTruncation("ollama", tc.estimated, tc.numCtx, tc.reported)
			if (e != nil) != tc.wantTooLong {
				t.Fatalf("silentTruncation(%d, %d, %d) = %v, want too long %v", tc.estimated, tc.numCtx, tc.reported, e, tc.wantTooLong)
			}
			if e != nil && (!e.TooLong || e.Window != tc.numCtx || e.Requested != tc.estimated || e.Status != 200) {
				t.Errorf("error %+v", e)
			}
		})
	}
}
