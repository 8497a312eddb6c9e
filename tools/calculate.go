package tools

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

//go:embed calculate.md
var calculateDescription string

// CalculateParams are the arguments of calculate.
type CalculateParams struct {
	Expression string `json:"expression" jsonschema:"description=The arithmetic expression to evaluate, e.g. (3 + 4.5) * 2 ^ 3,minLength=1,maxLength=1000"`
}

// RegisterCalculate adds the calculate tool.
func RegisterCalculate(r *Registry) error {
	return Register(r, "calculate", calculateDescription, func(_ context.Context, p CalculateParams) (Result, error) {
		v, err := Evaluate(p.Expression)
		if err != nil {
			return Result{Text: fmt.Sprintf("cannot evaluate %q: %v", p.Expression, err), IsError: true}, nil
		}
		return Result{Text: formatNumber(v)}, nil
	})
}

// The evaluator is written by hand, not taken from a module: the grammar is
// five rules, and an expression library (expr, govaluate) would also accept
// variables, function calls and string operations a model could misuse; this
// one can only do arithmetic, and its size and depth are bounded.
const (
	maxExprLen   = 1000
	maxExprDepth = 64
)

var errTooDeep = errors.New("too many nested parentheses or operators")

// Evaluate computes an arithmetic expression:
//
//	expr    = term { ("+" | "-") term }
//	term    = unary { ("*" | "/" | "%") unary }
//	unary   = ("+" | "-") unary | power
//	power   = primary [ ("^" | "**") unary ]   (right-associative; -2^2 = -4)
//	primary = number | "(" expr ")"
func Evaluate(expr string) (float64, error) {
	if len(expr) > maxExprLen {
		return 0, fmt.Errorf("expression longer than %d characters", maxExprLen)
	}
	p := &exprParser{src: expr}
	v, err := p.expr(0)
	if err != nil {
		return 0, err
	}
	p.skipSpace()
	if p.pos < len(p.src) {
		return 0, fmt.Errorf("unexpected %q at position %d", p.src[p.pos:p.pos+1], p.pos+1)
	}
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, errors.New("the result is not a finite number")
	}
	return v, nil
}

type exprParser struct {
	src string
	pos int
}

func (p *exprParser) skipSpace() {
	for p.pos < len(p.src) && strings.ContainsRune(" \t\r\n", rune(p.src[p.pos])) {
		p.pos++
	}
}

// accept consumes tok if it comes next.
func (p *exprParser) accept(tok string) bool {
	p.skipSpace()
	if strings.HasPrefix(p.src[p.pos:], tok) {
		p.pos += len(tok)
		return true
	}
	return false
}

func (p *exprParser) expr(depth int) (float64, error) {
	if depth > maxExprDepth {
		return 0, errTooDeep
	}
	v, err := p.term(depth)
	if err != nil {
		return 0, err
	}
	for {
		switch {
		case p.accept("+"):
			w, err := p.term(depth)
			if err != nil {
				return 0, err
			}
			v += w
		case p.accept("-"):
			w, err := p.term(depth)
			if err != nil {
				return 0, err
			}
			v -= w
		default:
			return v, nil
		}
	}
}

func (p *exprParser) term(depth int) (float64, error) {
	v, err := p.unary(depth)
	if err != nil {
		return 0, err
	}
	for {
		p.skipSpace()
		// "**" is power, not two multiplications.
		if strings.HasPrefix(p.src[p.pos:], "**") {
			return v, nil
		}
		var op byte
		switch {
		case p.accept("*"):
			op = '*'
		case p.accept("/"):
			op = '/'
		case p.accept("%"):
			op = '%'
		default:
			return v, nil
		}
		w, err := p.unary(depth)
		if err != nil {
			return 0, err
		}
		switch op {
		case '*':
			v *= w
		case '/':
			if w == 0 {
				return 0, errors.New("division by zero")
			}
			v /= w
		case '%':
			if w == 0 {
				return 0, errors.New("remainder by zero")
			}
			v = math.Mod(v, w)
		}
	}
}

func (p *exprParser) unary(depth int) (float64, error) {
	if depth > maxExprDepth {
		return 0, errTooDeep
	}
	switch {
	case p.accept("-"):
		v, err := p.unary(depth + 1)
		return -v, err
	case p.accept("+"):
		return p.unary(depth + 1)
	}
	return p.power(depth)
}

func (p *exprParser) power(depth int) (float64, error) {
	base, err := p.primary(depth)
	if err != nil {
		return 0, err
	}
	if p.accept("^") || p.accept("**") {
		exp, err := p.unary(depth + 1)
		if err != nil {
			return 0, err
		}
		v := math.Pow(base, exp)
		if math.IsNaN(v) {
			return 0, fmt.Errorf("%s ^ %s has no real value", formatNumber(base), formatNumber(exp))
		}
		return v, nil
	}
	return base, nil
}

func (p *exprParser) primary(depth int) (float64, error) {
	if p.accept("(") {
		v, err := p.expr(depth + 1)
		if err != nil {
			return 0, err
		}
		if !p.accept(")") {
			return 0, fmt.Errorf("missing ) at position %d", p.pos+1)
		}
		return v, nil
	}
	p.skipSpace()
	start := p.pos
	for p.pos < len(p.src) && (isDigit(p.src[p.pos]) || p.src[p.pos] == '.') {
		p.pos++
	}
	if p.pos == start {
		if p.pos == len(p.src) {
			return 0, errors.New("the expression ends where a number was expected")
		}
		return 0, fmt.Errorf("expected a number at position %d, found %q", p.pos+1, p.src[p.pos:p.pos+1])
	}
	// An exponent only when digits follow, so "2e" is reported, not eaten.
	if p.pos < len(p.src) && (p.src[p.pos] == 'e' || p.src[p.pos] == 'E') {
		j := p.pos + 1
		if j < len(p.src) && (p.src[j] == '+' || p.src[j] == '-') {
			j++
		}
		if j < len(p.src) && isDigit(p.src[j]) {
			for j < len(p.src) && isDigit(p.src[j]) {
				j++
			}
			p.pos = j
		}
	}
	lit := p.src[start:p.pos]
	v, err := strconv.ParseFloat(lit, 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not a number", lit)
	}
	return v, nil
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// formatNumber prints integers without a fraction and other values with 15
// significant digits, so 0.1+0.2 reads 0.3 rather than float noise.
func formatNumber(v float64) string {
	if v == 0 {
		v = 0 // drop the sign of negative zero
	}
	if v == math.Trunc(v) && math.Abs(v) < 1e15 {
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'g', 15, 64)
}
