package window

import (
	"unicode"
	"unicode/utf8"
)

// PictureTokens is what one picture counts for, whatever its size: providers
// bill pictures by their own tiling rules, and 1,600 covers the common ones
// (a 1092×1092 picture on Anthropic, a high-detail 1024×1024 on OpenAI).
const PictureTokens = 1600

// feature is one kind of run or character the scanner counts. The estimate
// is the sum of each count times its rate, so the rates can be fitted against
// real tokenizers (see BENCHMARKS.md, "Token estimate") without touching the scanner.
type feature int

const (
	fWordPiece  feature = iota // a Latin word, or one piece of a camelCase/ALLCAPS identifier
	fWordExcess                // letters of a Latin piece beyond the first pieceFree
	fAccented                  // a non-ASCII Latin letter (é, ß, ł): usually splits its word
	fAccentWord                // a Latin word holding at least one non-ASCII letter
	fDigitRun                  // a run of digits
	fDigit                     // one digit (tokenizers split numbers into 1–3 digit pieces)
	fRandom                    // one character of a hash, base64 or other random-looking run
	fPunct                     // one ASCII punctuation character
	fPunctRun                  // a run of ASCII punctuation (common pairs merge: `",`, `{"`)
	fNewline                   // one line break
	fIndent                    // a run of two or more spaces or tabs
	fSymbol                    // one non-ASCII punctuation or symbol (—, «, •, ©)
	fAstral                    // one character outside the basic plane (emoji, rare Han)
	fCyrWord                   // a Cyrillic word
	fCyrChar                   // one Cyrillic letter
	fGreekWord                 //
	fGreekChar                 //
	fArabicWord                // Arabic, Hebrew, Syriac, Thaana: words with few vowels written
	fArabicChar                //
	fHebrewWord                //
	fHebrewChar                //
	fRareWord                  // Armenian, Georgian, Ethiopic and other small alphabets
	fRareChar                  //
	fIndicWord                 // Devanagari, Bengali, Tamil and the other Brahmic scripts of India
	fIndicChar                 //
	fThaiChar                  // Thai, Lao, Khmer, Myanmar: no spaces between words
	fHangulChar                // one Hangul syllable
	fHanChar                   // one CJK ideograph
	fKanaChar                  // one Hiragana or Katakana character
	fOtherChar                 // any other letter or mark
	nFeatures
)

// pieceFree is how many letters of a Latin word piece its first token
// covers; longer pieces cost fWordExcess per extra letter.
const pieceFree = 6

// rates is the cost of each feature in tokens, fitted on
// /work/shared/tokens/samples.jsonl to keep estimate/real close to 1 for
// seven tokenizers at once (o200k, cl100k, llama3, qwen3, gemma3, tekken,
// claude2). Where tokenizers disagree (llama3 spends a token per byte on
// Armenian, gemma3 a token per word) the rate sits between them.
var rates = [nFeatures]float64{
	fWordPiece:  1.00,
	fWordExcess: 0.20,
	fAccented:   0.62,
	fAccentWord: 0.34,
	fDigitRun:   0.79,
	fDigit:      0.55,
	fRandom:     0.67,
	fPunct:      0.33,
	fPunctRun:   0.44,
	fNewline:    1.30,
	fIndent:     0.32,
	fSymbol:     1.42,
	fAstral:     2.00,
	fCyrWord:    1.53,
	fCyrChar:    0.21,
	fGreekWord:  1.00,
	fGreekChar:  0.30,
	fArabicWord: 0.98,
	fArabicChar: 0.23,
	fHebrewWord: 1.00,
	fHebrewChar: 0.30,
	fRareWord:   1.43,
	fRareChar:   0.65,
	fIndicWord:  0.97,
	fIndicChar:  0.35,
	fThaiChar:   0.52,
	fHangulChar: 0.80,
	fHanChar:    0.61,
	fKanaChar:   0.75,
	fOtherChar:  0.91,
}

// EstimateText returns an estimate of how many tokens s costs a typical
// modern tokenizer. It scans s once, sorting characters into runs (words,
// digits, punctuation, whitespace, each script) and charging a fitted rate
// for each kind; it allocates nothing.
func EstimateText(s string) int {
	if s == "" {
		return 0
	}
	c := countFeatures(s)
	return tokens(&c)
}

// Counts are what a text's estimate is made of. Two texts joined where the
// first ends or the second starts with a line break count as the sum of
// their counts, so a request built of lines already counted is estimated
// without reading them again: Count(a+"\n"+b).Tokens() is
// Count(a).Add(Count("\n")).Add(Count(b)).Tokens().
type Counts struct {
	c     [nFeatures]float64
	bytes int // 0: the empty text, which costs nothing
}

// Count counts s's features, as EstimateText does.
func Count(s string) Counts {
	if s == "" {
		return Counts{}
	}
	return Counts{c: countFeatures(s), bytes: len(s)}
}

// Add returns the counts of c's text followed by o's: exact when the first
// ends or the second starts with a line break.
func (c Counts) Add(o Counts) Counts {
	for i := range c.c {
		c.c[i] += o.c[i]
	}
	c.bytes += o.bytes
	return c
}

// Tokens is the estimate of the counted text: EstimateText of it.
func (c Counts) Tokens() int {
	if c.bytes == 0 {
		return 0
	}
	return tokens(&c.c)
}

// tokens charges each feature counted its rate.
func tokens(c *[nFeatures]float64) int {
	var sum float64
	for i, n := range c {
		sum += n * rates[i]
	}
	if sum < 1 {
		return 1
	}
	return int(sum + 0.5)
}

// script groups the characters the scanner tells apart.
type script uint8

const (
	sSpace script = iota
	sNewline
	sLatin // ASCII letters and Latin letters with diacritics
	sDigit
	sPunct // ASCII punctuation and symbols
	sSymbol
	sCyrillic
	sGreek
	sArabic
	sHebrew
	sRare
	sIndic
	sThai
	sHangul
	sHan
	sKana
	sOther
)

// wordFeature gives the word and character features of the
// space-delimited non-Latin scripts (ok false for the others); charFeature
// is the per-character feature of scripts written without spaces.
var wordFeature = [...]struct {
	word, char feature
	ok         bool
}{
	sCyrillic: {fCyrWord, fCyrChar, true},
	sGreek:    {fGreekWord, fGreekChar, true},
	sArabic:   {fArabicWord, fArabicChar, true},
	sHebrew:   {fHebrewWord, fHebrewChar, true},
	sRare:     {fRareWord, fRareChar, true},
	sIndic:    {fIndicWord, fIndicChar, true},
	sOther:    {},
}

var charFeature = [...]feature{
	sThai:   fThaiChar,
	sHangul: fHangulChar,
	sHan:    fHanChar,
	sKana:   fKanaChar,
	sOther:  fOtherChar,
}

func classify(r rune) script {
	if r < utf8.RuneSelf {
		switch {
		case r == '\n' || r == '\r':
			return sNewline
		case r == ' ' || r == '\t' || r == '\f' || r == '\v':
			return sSpace
		case 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z':
			return sLatin
		case '0' <= r && r <= '9':
			return sDigit
		default:
			return sPunct
		}
	}
	switch {
	case r <= 0x024F || 0x1E00 <= r && r <= 0x1EFF:
		if unicode.IsLetter(r) {
			return sLatin
		}
		if unicode.IsSpace(r) {
			return sSpace
		}
		return sSymbol
	case 0x0300 <= r && r <= 0x036F: // combining diacritics join the word they follow
		return sLatin
	case 0x0370 <= r && r <= 0x03FF || 0x1F00 <= r && r <= 0x1FFF:
		return sGreek
	case 0x0400 <= r && r <= 0x052F:
		return sCyrillic
	case 0x0530 <= r && r <= 0x058F, 0x10A0 <= r && r <= 0x10FF, 0x1200 <= r && r <= 0x139F:
		return sRare // Armenian, Georgian, Ethiopic, Cherokee
	case 0x0590 <= r && r <= 0x05FF:
		return sHebrew
	case 0x0600 <= r && r <= 0x08FF, 0xFB50 <= r && r <= 0xFDFF, 0xFE70 <= r && r <= 0xFEFF:
		return sArabic // with Syriac and Thaana
	case 0x0900 <= r && r <= 0x0DFF:
		return sIndic
	case 0x0E00 <= r && r <= 0x0FFF, 0x1000 <= r && r <= 0x109F, 0x1780 <= r && r <= 0x17FF:
		return sThai // Thai, Lao, Tibetan, Myanmar, Khmer
	case 0x1100 <= r && r <= 0x11FF, 0xAC00 <= r && r <= 0xD7AF, 0x3130 <= r && r <= 0x318F:
		return sHangul
	case 0x3040 <= r && r <= 0x30FF, 0x31F0 <= r && r <= 0x31FF, 0xFF66 <= r && r <= 0xFF9F:
		return sKana
	case 0x4E00 <= r && r <= 0x9FFF, 0x3400 <= r && r <= 0x4DBF, 0xF900 <= r && r <= 0xFAFF:
		return sHan
	case unicode.IsSpace(r):
		if r == 0x2028 || r == 0x2029 || r == 0x85 {
			return sNewline
		}
		return sSpace
	case unicode.IsLetter(r) || unicode.Is(unicode.Mn, r) || unicode.Is(unicode.Mc, r):
		return sOther
	default:
		return sSymbol
	}
}

// latinRun accumulates one run of Latin letters and digits (an identifier, a
// word, a number, a hash) until it ends and can be judged as a whole.
type latinRun struct {
	n, digits, accented int
	letterDigit         int // letter↔digit changes
	caseSwitch          int // adjacent letters of different case
	pieces, excess      int // camelCase pieces and their letters past pieceFree
	digitRuns           int
	piece               int // letters in the current piece
	prevUpper, prevDig  bool
	prevLetter, prev2Up bool
}

func (l *latinRun) add(r rune) {
	isDig := '0' <= r && r <= '9'
	l.n++
	if isDig {
		if l.n == 1 || !l.prevDig {
			l.digitRuns++
			if l.n > 1 {
				l.letterDigit++
			}
			l.closePiece()
		}
		l.digits++
		l.prevDig, l.prevLetter = true, false
		return
	}
	up := unicode.IsUpper(r)
	if r >= utf8.RuneSelf && !(0x0300 <= r && r <= 0x036F) {
		l.accented++
	}
	if l.prevDig {
		l.letterDigit++
	}
	if l.prevLetter {
		if up != l.prevUpper {
			l.caseSwitch++
		}
		// A piece starts at a lower→upper change (camelCase) and before the
		// last capital of a run of capitals followed by lower case (HTTPServer).
		if up && !l.prevUpper {
			l.closePiece()
		} else if !up && l.prevUpper && l.prev2Up && l.piece > 1 {
			l.piece--
			l.closePiece()
			l.piece = 1
		}
	}
	l.piece++
	l.prev2Up = l.prevLetter && l.prevUpper
	l.prevUpper, l.prevDig, l.prevLetter = up, false, true
}

func (l *latinRun) closePiece() {
	if l.piece == 0 {
		return
	}
	l.pieces++
	if l.piece > pieceFree {
		l.excess += l.piece - pieceFree
	}
	l.piece = 0
}

// random reports whether the run looks like a hash or base64: long, with
// letters and digits interleaved or case flipping all the time. Tokenizers
// learned no merges for such text and spend a token per two or three
// characters.
func (l *latinRun) random() bool {
	if l.n < 8 {
		return false
	}
	if l.letterDigit >= 3 || l.letterDigit >= 2 && l.n >= 12 {
		return true
	}
	return l.n >= 12 && l.caseSwitch*3 >= l.n
}

func (l *latinRun) flush(c *[nFeatures]float64) {
	if l.n == 0 {
		return
	}
	l.closePiece()
	if l.random() {
		c[fRandom] += float64(l.n)
	} else {
		c[fWordPiece] += float64(l.pieces)
		c[fWordExcess] += float64(l.excess)
		c[fDigitRun] += float64(l.digitRuns)
		c[fDigit] += float64(l.digits)
		c[fAccented] += float64(l.accented)
		if l.accented > 0 {
			c[fAccentWord]++
		}
	}
	*l = latinRun{}
}

// countFeatures is the one pass behind EstimateText.
func countFeatures(s string) [nFeatures]float64 {
	var c [nFeatures]float64
	var lat latinRun
	prev := sSpace
	spaces := 0 // length of the current run of spaces
	for _, r := range s {
		k := classify(r)
		if k != sLatin && k != sDigit {
			lat.flush(&c)
		}
		if k != sSpace {
			if spaces >= 2 {
				c[fIndent]++
			}
			spaces = 0
		}
		switch k {
		case sLatin, sDigit:
			lat.add(r)
		case sSpace:
			spaces++
		case sNewline:
			if r != '\r' {
				c[fNewline]++
			}
		case sPunct:
			c[fPunct]++
			if prev != sPunct {
				c[fPunctRun]++
			}
		case sSymbol:
			c[fSymbol]++
		default:
			if wf := wordFeature[k]; wf.ok {
				c[wf.char]++
				if prev != k {
					c[wf.word]++
				}
			} else {
				c[charFeature[k]]++
			}
		}
		if r > 0xFFFF {
			c[fAstral]++
		}
		prev = k
	}
	lat.flush(&c)
	if spaces >= 2 {
		c[fIndent]++
	}
	return c
}
