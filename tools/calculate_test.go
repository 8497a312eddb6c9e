package tools

import (
	"context"
	"math"
	"strings"
	"testing"

	"github.com/agentd/agentd/chat"
)

func TestEvaluate(t *testing.T) {
	tests := []struct {
		expr string
		want float64
	}{
		{"1 + 2", 3},
		{"2 + 3 * 4", 14},   // * binds tighter than +
		{"(2 + 3) * 4", 20}, // parentheses first
		{"10 - 4 - 3", 3},   // left-associative: (10-4)-3
		{"100 / 10 / 5", 2}, // left-associative: (100/10)/5
		{"7 % 3", 1},        // remainder
		{"-7 % 3", -1},      // sign follows the dividend, as math.Mod
		{"2 ^ 10", 1024},    // power
		{"2 ** 10", 1024},   // Python-style power
		{"2 ^ 3 ^ 2", 512},  // right-associative: 2^(3^2) = 2^9
		{"-2 ^ 2", -4},      // unary minus applies after power
		{"(-2) ^ 2", 4},     // unless parenthesised
		{"2 ^ -1", 0.5},     // negative exponent
		{"--3", 3},          // double negation
		{"+5", 5},           // unary plus
		{"3.5 * 2", 7},      // decimals
		{".5 + .25", 0.75},  // leading dot
		{"1.5e3 + 1", 1501}, // exponent notation
		{"2E-2 * 100", 2},   // upper-case exponent, negative
		{"  ( 1 + ( 2 * ( 3 + 4 ) ) ) ", 15},
		{"100 * 1.07 ^ 2", 114.49}, // 1.07^2 = 1.1449
		{"9 ^ 0.5", 3},             // fractional power
	}
	for _, tc := range tests {
		t.Run(tc.expr, func(t *testing.T) {
			got, err := Evaluate(tc.expr)
			if err != nil {
				t.Fatalf("Evaluate(%q): %v", tc.expr, err)
			}
			if math.Abs(got-tc.want) > 1e-9*math.Max(1, math.Abs(tc.want)) {
				t.Errorf("Evaluate(%q) = %v, want %v", tc.expr, got, tc.want)
			}
		})
	}
}

func TestEvaluateErrors(t *testing.T) {
	tests := []struct {
		name, expr, wantMsg string
	}{
		{"empty", "", "expected"},
		{"dangling operator", "1 +", "expected"},
		{"division by zero", "1 / (2 - 2)", "division by zero"},
		{"remainder by zero", "5 % 0", "remainder by zero"},
		{"unbalanced open", "(1 + 2", "missing )"},
		{"unbalanced close", "1 + 2)", "unexpected"},
		{"letters", "2 * x", `"x"`},
		{"function call", "sqrt(4)", `"s"`},
		{"two dots", "1.2.3", "not a number"},
		{"incomplete exponent", "2e", "unexpected"},
		{"negative root", "(-8) ^ 0.5", "no real value"},
		{"overflow", "10 ^ 400", "not a finite"},
		{"too long", strings.Repeat("1+", 600) + "1", "longer than"},
		{"too deep", strings.Repeat("(", 200) + "1" + strings.Repeat(")", 200), "nested"},
		{"too many signs", strings.Repeat("-", 200) + "1", "nested"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v, err := Evaluate(tc.expr)
			if err == nil {
				t.Fatalf("Evaluate(%q) = %v, want an error", tc.expr, v)
			}
			if !strings.Contains(err.Error(), tc.wantMsg) {
				t.Errorf("error %q does not say %q", err, tc.wantMsg)
			}
		})
	}
}

func TestCalculateTool(t *testing.T) {
	r := NewRegistry()
	if err := RegisterCalculate(r); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, args, want string
		wantError        bool
	}{
		// 0.1+0.2 is 0.30000000000000004 in binary floating point; the
		// tool prints 15 significant digits so the model reads 0.3.
		{"float noise hidden", `{"expression":"0.1 + 0.2"}`, "0.3", false},
		{"integer without fraction", `{"expression":"6 * 7"}`, "42", false},
		{"negative zero printed as zero", `{"expression":"-0 * 1"}`, "0", false},
		{"large value", `{"expression":"2 ^ 60"}`, "1.15292150460685e+18", false},
		{"error names the expression", `{"expression":"1 / 0"}`, `cannot evaluate "1 / 0": division by zero`, true},
		{"missing argument", `{}`, `"expression" is required`, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := r.Run(context.Background(), chat.ToolCall{Name: "calculate", Arguments: tc.args}, Limits{})
			if res.IsError != tc.wantError {
				t.Errorf("IsError = %v, want %v: %q", res.IsError, tc.wantError, res.Text)
			}
			if tc.wantError {
				if !strings.Contains(res.Text, tc.want) {
					t.Errorf("text %q does not contain %q", res.Text, tc.want)
				}
			} else if res.Text != tc.want {
				t.Errorf("text = %q, want %q", res.Text, tc.want)
			}
		})
	}
}
