package window

import "testing"

func TestNewBudget(t *testing.T) {
	// K is 1,024 tokens; 90% and 15% round down.
	tests := map[string]struct {
		window, system, tools int
		want                  Budget
	}{
		// 4096*9/10 = 3686; 15% = 614 is under 1K, so 1024;
		// 3686 - 1024 - 1000 - 500 = 1162.
		"4K": {4096, 1000, 500, Budget{Window: 4096, Usable: 3686, Answer: 1024, System: 1000, Tools: 500, Transcript: 1162}},
		// 8192*9/10 = 7372; 8192*15/100 = 1228; 7372 - 1228 - 1000 - 500 = 4644.
		"8K": {8192, 1000, 500, Budget{Window: 8192, Usable: 7372, Answer: 1228, System: 1000, Tools: 500, Transcript: 4644}},
		// 32768*9/10 = 29491; 32768*15/100 = 4915; 29491 - 4915 - 1500 = 23076.
		"32K": {32768, 1000, 500, Budget{Window: 32768, Usable: 29491, Answer: 4915, System: 1000, Tools: 500, Transcript: 23076}},
		// 131072*9/10 = 117964; 15% = 19660 is over 16K, so 16384;
		// 117964 - 16384 - 1500 = 100080, over the 100,000 cap.
		"128K": {131072, 1000, 500, Budget{Window: 131072, Usable: 117964, Answer: 16384, System: 1000, Tools: 500, Transcript: 100000}},
		// 1048576*9/10 = 943718; answer 16384; the transcript is capped at 100,000.
		"1M": {1 << 20, 1000, 500, Budget{Window: 1 << 20, Usable: 943718, Answer: 16384, System: 1000, Tools: 500, Transcript: 100000}},
		// 128K with a 20K system prompt and 10K of tools:
		// 117964 - 16384 - 20000 - 10000 = 71580, under the cap.
		"128K-big-prompt": {131072, 20000, 10000, Budget{Window: 131072, Usable: 117964, Answer: 16384, System: 20000, Tools: 10000, Transcript: 71580}},
		// 8K with a 7K system prompt: 7372 - 1228 - 7000 < 0, so nothing is left.
		"8K-prompt-too-big": {8192, 7000, 0, Budget{Window: 8192, Usable: 7372, Answer: 1228, System: 7000, Tools: 0, Transcript: 0}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := NewBudget(tc.window, tc.system, tc.tools)
			if got != tc.want {
				t.Errorf("NewBudget(%d, %d, %d) = %+v, want %+v", tc.window, tc.system, tc.tools, got, tc.want)
			}
			if l := got.Limit(); l != tc.system+tc.tools+tc.want.Transcript {
				t.Errorf("Limit = %d", l)
			}
		})
	}
}

func TestBudgetWithin(t *testing.T) {
	b := NewBudget(32000, 500, 700)
	cases := []struct {
		name  string
		total int
		want  int // the transcript's share
	}{
		{"a total above the budget changes nothing", 1 << 20, b.Transcript},
		{"the budget's own limit changes nothing", b.Limit(), b.Transcript},
		{"a lower total lowers the transcript's share", 2000, 2000 - 500 - 700},
		{"a total the fixed parts fill leaves none", 1000, 0},
	}
	for _, c := range cases {
		got := b.Within(c.total)
		if got.Transcript != c.want {
			t.Errorf("%s: transcript %d, want %d", c.name, got.Transcript, c.want)
		}
		if got.System != b.System || got.Tools != b.Tools || got.Window != b.Window || got.Answer != b.Answer {
			t.Errorf("%s: changed more than the transcript: %+v", c.name, got)
		}
		if c.want > 0 && got.Limit() > c.total {
			t.Errorf("%s: limit %d over the total %d", c.name, got.Limit(), c.total)
		}
	}
}

func TestWorkingSize(t *testing.T) {
	cases := []struct {
		name                    string
		window, threshold, want int
		working                 bool
	}{
		{"a small window holds its share", 8000, 12000, 4800, true},
		{"a window the threshold's share of holds the threshold", 20000, 12000, 12000, false},
		{"a big window holds the threshold", 128000, 12000, 12000, false},
		{"a low threshold holds itself on a small window", 8000, 3000, 3000, false},
	}
	for _, c := range cases {
		got, working := WorkingSize(c.window, c.threshold)
		if got != c.want || working != c.working {
			t.Errorf("%s: WorkingSize(%d, %d) = %d, %v, want %d, %v", c.name, c.window, c.threshold, got, working, c.want, c.working)
		}
	}
}
