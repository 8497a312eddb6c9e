package toolsearch

import (
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

// words splits text into lowercase words: camelCase and PascalCase humps,
// snake_case, dots, dashes, slashes and spaces all separate words, so
// "GetWeather", "get_weather" and "weather.get" share "get" and "weather".
// Runs of digits stay with the letters before them only when there is no
// case change ("mp3"), which keeps version-like names whole.
func words(text string) []string {
	var out []string
	eachWord(text, nil, func(w []byte) { out = append(out, string(w)) })
	return out
}

// eachWord calls fn with each word of text (see words), lowercased in buf,
// which it returns for reuse; w is only valid during the call. ASCII text,
// nearly all of it, takes a path with no allocation.
func eachWord(text string, buf []byte, fn func(w []byte)) []byte {
	for i := 0; i < len(text); i++ {
		if text[i] >= utf8.RuneSelf {
			for _, w := range unicodeWords(text) {
				fn([]byte(w))
			}
			return buf
		}
	}
	start := -1
	flush := func(end int) {
		if start >= 0 && end > start {
			buf = append(buf[:0], text[start:end]...)
			for k, c := range buf {
				if 'A' <= c && c <= 'Z' {
					buf[k] = c + 'a' - 'A'
				}
			}
			fn(buf)
		}
		start = -1
	}
	for i := 0; i < len(text); i++ {
		c := text[i]
		if !isASCIIAlnum(c) {
			flush(i)
			continue
		}
		if start < 0 {
			start = i
			continue
		}
		prev := text[i-1]
		if isUpper(c) && (isLower(prev) || isDigit(prev)) ||
			isUpper(prev) && isUpper(c) && i+1 < len(text) && isLower(text[i+1]) {
			flush(i)
			start = i
		}
	}
	flush(len(text))
	return buf
}

func isLetter(c byte) bool { return isUpper(c) || isLower(c) }
func isUpper(c byte) bool  { return 'A' <= c && c <= 'Z' }
func isLower(c byte) bool  { return 'a' <= c && c <= 'z' }
func isDigit(c byte) bool  { return '0' <= c && c <= '9' }

// unicodeWords is words for any text, by runes.
func unicodeWords(text string) []string {
	var out []string
	rs := []rune(text)
	start := -1
	flush := func(end int) {
		if start >= 0 && end > start {
			out = append(out, strings.ToLower(string(rs[start:end])))
		}
		start = -1
	}
	for i, r := range rs {
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) {
			flush(i)
			continue
		}
		if start < 0 {
			start = i
			continue
		}
		prev := rs[i-1]
		switch {
		case unicode.IsUpper(r) && (unicode.IsLower(prev) || unicode.IsDigit(prev)):
			// fooBar, foo2Bar
			flush(i)
			start = i
		case unicode.IsUpper(prev) && unicode.IsUpper(r) && i+1 < len(rs) && unicode.IsLower(rs[i+1]):
			// HTTPServer: the last capital starts the next word
			flush(i)
			start = i
		}
	}
	flush(len(rs))
	return out
}

// stopwords carry no evidence about which tool is wanted: function words and
// the polite frame people put around a request ("could you please help me").
var stopwords = setOf(`a about above after again against all also am an and any are as at be
because been before being below between both but by can could did do does doing down during each
few for from further had has have having he her here hers herself him himself his how i if in into
is it its itself just let lets me more most my myself no nor not now of off on once only or other
our ours ourselves out over own please same she should so some such than that the their theirs them
themselves then there these they this those through to too under until up very was we were what
when where which while who whom why will with would you your yours yourself yourselves
s t d ll m re ve y o hi hello hey thanks thank kindly wish want wanted need needs like
would like help tell know give provide interested curious able sure okay ok
going doing im id ive youre dont cant wont`)

// setOf builds a set from whitespace-separated words.
func setOf(list string) map[string]bool {
	m := make(map[string]bool)
	for _, w := range strings.Fields(list) {
		m[w] = true
	}
	return m
}

func isNumber(w string) bool {
	for _, r := range w {
		if !unicode.IsDigit(r) {
			return false
		}
	}
	return true
}

// synonymGroups are everyday words for the same need. A query word in a group
// also searches for the others, at a lower weight, so "what's the forecast"
// finds get_weather and "remember this" finds memory_add. The groups are
// deliberately small: each link also lets unrelated tools in.
var synonymGroups = [][]string{
	{"web", "website", "site", "webpage", "page", "url", "link", "address", "browser", "browse", "internet", "online", "http", "fetch"},
	{"remember", "memory", "memorize", "memorise", "recall", "remind"},
	{"weather", "forecast", "temperature", "climate"},
	{"email", "mail", "inbox", "gmail"},
	{"find", "search", "lookup", "look", "locate", "query"},
	{"calculate", "compute", "calculation", "calc", "determine", "estimate"},
	{"multiply", "multiplication", "product", "times"},
	{"add", "sum", "addition", "plus", "total"},
	{"subtract", "subtraction", "minus", "difference"},
	{"divide", "division", "quotient", "ratio"},
	{"movie", "film", "cinema"},
	{"song", "music", "track", "tune", "album"},
	{"image", "picture", "photo", "photograph", "pic"},
	{"car", "vehicle", "automobile"},
	{"buy", "purchase", "order", "shop"},
	{"book", "reserve", "reservation", "booking"},
	{"price", "cost", "fee", "fare"},
	{"delete", "remove", "erase"},
	{"create", "make", "new", "generate"},
	{"direction", "route", "navigate", "navigation", "way"},
	{"restaurant", "food", "eat", "dine", "dining", "meal"},
	{"flight", "fly", "airline", "plane"},
	{"hotel", "accommodation", "lodging", "stay", "room"},
	{"translate", "translation", "translator"},
	{"stock", "share", "ticker", "equity"},
	{"doctor", "physician", "medic"},
	{"document", "doc", "file"},
	{"message", "text", "sms", "chat"},
	{"call", "phone", "dial"},
	{"schedule", "calendar", "appointment", "meeting", "event"},
	{"news", "headline", "article"},
	{"distance", "far", "length"},
	{"currency", "money", "exchange"},
	{"run", "execute", "launch", "start", "command", "shell", "terminal"},
	{"kill", "stop", "terminate", "close"},
	{"convert", "conversion", "transform"},
	{"history", "historical", "past"},
	{"population", "people", "inhabitant"},
	{"area", "size", "square"},
	{"recipe", "cook", "cooking", "dish"},
	{"time", "clock", "hour"},
	{"date", "day", "today", "tomorrow", "yesterday"},
}

// synonyms maps a stemmed term to the stemmed members of its groups.
var synonyms = buildSynonyms(synonymGroups)

func buildSynonyms(groups [][]string) map[string][]string {
	m := make(map[string][]string)
	for _, g := range groups {
		stems := make([]string, 0, len(g))
		seen := map[string]bool{}
		for _, w := range g {
			s := stem(w)
			if !seen[s] {
				seen[s] = true
				stems = append(stems, s)
			}
		}
		for _, s := range stems {
			for _, o := range stems {
				if o != s && !contains(m[s], o) {
					m[s] = append(m[s], o)
				}
			}
		}
	}
	return m
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// addressPattern finds a web address in a person's words: a URL with a
// scheme, a www. host, or a bare domain such as example.com.
var addressPattern = regexp.MustCompile(`(?i)\bhttps?://\S+|\bwww\.\S+|\b[a-z0-9-]+(\.[a-z0-9-]+)*\.(com|org|net|io|dev|edu|gov|co|uk|de|fr|app|ai|info|me|ly)\b`)

// webTerms are the terms an address stands for: a URL in a message means the
// person wants something from the web.
var webTerms = []string{stem("web"), stem("url"), stem("browse"), stem("fetch"), stem("website"), stem("http")}

// hasAddress reports whether text contains a web address. Every match has
// "://", "www." or a dot followed by a domain the pattern knows and a word
// boundary, so ASCII text with none of them (most requests: "3.5 km" and
// "math.factorial" have none) skips the pattern; other text does not, since
// (?i) folds a few non-ASCII letters into ASCII ones.
func hasAddress(text string) bool {
	return mayHaveAddress(text) && addressPattern.MatchString(text)
}

func mayHaveAddress(text string) bool {
	if strings.Contains(text, "://") {
		return true
	}
	for i := 0; i < len(text); i++ {
		c := text[i]
		if c >= utf8.RuneSelf {
			return true
		}
		if c == '.' && (endsInDomain(text[i+1:]) || i >= 3 && strings.EqualFold(text[i-3:i], "www")) {
			return true
		}
	}
	return false
}

// endsInDomain reports whether rest starts with a domain addressPattern
// knows, in any case, followed by a word boundary.
func endsInDomain(rest string) bool {
	for _, d := range domains {
		if len(rest) >= len(d) && strings.EqualFold(rest[:len(d)], d) && (len(rest) == len(d) || !isWordByte(rest[len(d)])) {
			return true
		}
	}
	return false
}

// domains are the ones addressPattern knows.
var domains = strings.Split("com|org|net|io|dev|edu|gov|co|uk|de|fr|app|ai|info|me|ly", "|")

func isASCIIAlnum(c byte) bool { return isLetter(c) || isDigit(c) }
