package redact

import (
	"regexp"
	"strings"
	"unicode"
)

// rule finds one kind of secret. A rule with hints runs only near them (see
// hintWindows): Go's regexp engine is slow on long texts (and on big
// expressions), and a tool result of a megabyte is an ordinary fold.
type rule struct {
	find func(s string) []span // every match in s
	// prefix, for rules that start with a name, is the match at the very
	// start of s: tried only where a hint says a name may start, it fails
	// within a few bytes where there is none.
	prefix func(s string) (span, bool)
	hints  []string // ASCII lower-case (or exact, for other scripts); nil: the whole text
}

// near returns r run only near the hints.
func (r rule) near(hints ...string) rule {
	r.hints = hints
	return r
}

// re is a rule from a regexp: the secret is the first of groups that
// matched (the whole match when groups is empty), kept when ok accepts it.
func re(expr string, ok func(string) bool, groups ...int) rule {
	x := regexp.MustCompile(expr)
	return rule{find: func(s string) []span {
		var out []span
		for _, m := range x.FindAllStringSubmatchIndex(s, -1) {
			if sp := pick(m, groups); ok == nil || ok(s[sp.start:sp.end]) {
				out = append(out, sp)
			}
		}
		return out
	}}
}

// named is a rule whose matches start with lead and a name: re, plus the
// match anchored at the start of a text.
func named(expr string, ok func(string) bool, groups ...int) rule {
	r := re(expr, ok, groups...)
	x := regexp.MustCompile(`^(?:` + expr + `)`)
	r.prefix = func(s string) (span, bool) {
		m := x.FindStringSubmatchIndex(s)
		if m == nil {
			return span{}, false
		}
		sp := pick(m, groups)
		return sp, ok == nil || ok(s[sp.start:sp.end])
	}
	return r
}

// pick is the secret's span in a match: the first of groups that matched,
// or the whole match.
func pick(m []int, groups []int) span {
	for _, g := range groups {
		if m[2*g] >= 0 {
			return span{m[2*g], m[2*g+1]}
		}
	}
	return span{m[0], m[1]}
}

// Building blocks of the prose and key=value rules.
const (
	// lead stands where \b would, for non-ASCII words too.
	lead = `(?:^|[^\pL\pN_])`
	// passwordWords name a password in the languages agentd's people write.
	passwordWords = `passwords?|passwor[dt]|kennwort|passcode|pass ?phrase|pwd?|mot de passe|mdp|contrase(?:ñ|n)a|clave|senha|wachtwoord|has(?:ł|l)o|пароль|salasana|l(?:ö|o)senord|passord|adgangskode|heslo|(?:ş|s)ifre(?:m|si)?|parola|jelsz(?:ó|o)|lozinka|` +
		`api[ _-]?key|access[ _-]?token|auth[ _-]?token|secret[ _-]?(?:access[ _-]?)?key|client[ _-]?secret|private[ _-]?key`
	// ofWhat is "for the staging database", "für das WLAN", "de mi cuenta":
	// at most four words between the name and what it is.
	ofWhat = `(?:\s+(?:for|of|to|on|at|für|fürs|zum|zur|von|vom|de|du|des|d'|pour|del|para|per|di|do|da|dla|voor|van|för|til|на|для|от)\s*[^\s:=：]{1,64}(?:\s+[^\s:=：]{1,64}){0,3}?)?`
	// isWord joins a name and its value.
	isWord = `(?:\s*[:=：]\s*|\s*(?:是|为|為|は)\s*|'s\s+|\s+(?:->|→|—|–|-)\s+|\s+(?:is|was|lautet|ist|war|heißt|est|était|es|era|è|é|to|jest|je|on|er|är|var|это)(?:\s*:)?\s+)`
	// value is a quoted phrase (its inside) or one word.
	value = "(?:\"([^\"\\n]{1,200})\"|'([^'\\n]{1,200})'|“([^”\\n]{1,200})”|„([^“\\n]{1,200})“|«\\s?([^»\\n]{1,200}?)\\s?»|`([^`\\n]{1,200})`|([^\\s\"'`<>“”«»]{2,200}))"
	// keyName is a config or header key that holds a secret: db_password,
	// X-API-Key, OPENAI_API_KEY, client_secret, "token".
	keyName = `(?i:(?:[\w.]*[_.-])?(?:passwor[dt]|passwd|pass|pwd|passphrase|secret|token|api[_-]?key|apikey|access[_-]?key|secret[_-]?key|private[_-]?key|auth|credentials?|kennwort))|` +
		`[a-z][a-zA-Z0-9]*(?:Password|Passwd|Pwd|Secret|Token|ApiKey|AccessKey|SecretKey|PrivateKey)`
)

// loginWords name a user and password pair; userPass is the pair, the
// password its group 1.
const (
	loginWords = `(?:log-?in|logon|sign-?in|credentials|creds|zugangsdaten|anmeldedaten|identifiants|user(?:name)?\s*/\s*pass(?:word)?|benutzer(?:name)?\s*/\s*passwort)`
	userPass   = `[^\s/:,;]{1,64}\s*(?:/|:|\s\|\s)\s*([^\s,;]{2,128})`
)

var valueGroups = []int{1, 2, 3, 4, 5, 6, 7}

// rules are every kind of secret Mask hides. Order does not matter: spans
// that overlap are merged.
var rules = []rule{
	re( // private key
		`-----BEGIN[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?-----[\s\S]*?(?:-----END[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?-----|\z)`, nil),

	// Tokens with a vendor's shape.
	re( // openai/anthropic key
		`\bsk-(?:ant-|proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{16,}`, nil).near("sk-"),
	re( // stripe key
		`\b[sr]k_(?:live|test)_[A-Za-z0-9]{10,}`, nil).near("k_live_", "k_test_"),
	re( // stripe webhook secret
		`\bwhsec_[A-Za-z0-9+/=]{16,}`, nil).near("whsec_"),
	re( // aws access key id
		`\b(?:AKIA|ASIA)[A-Z0-9]{16}\b`, nil).near("akia", "asia"),
	{find: awsSecrets}, // a standalone AWS secret access key
	re( // google api key
		`\bAIza[0-9A-Za-z_\-]{30,}`, nil).near("aiza"),
	re( // google oauth token
		`\bya29\.[0-9A-Za-z_\-]{20,}`, nil).near("ya29."),
	re( // github token
		`\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})`, nil).near("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
	re( // gitlab token
		`\bgl(?:pat|dt|rt|ptt|soat|cbt|imt|ft|oas|agent)-[A-Za-z0-9_\-]{20,}`, nil).near("glpat-", "gldt-", "glrt-", "glptt-", "glsoat-", "glcbt-", "glimt-", "glft-", "gloas-", "glagent-"),
	re( // slack token
		`\b(?:xox[abposre]-[A-Za-z0-9\-]{10,}|xapp-[0-9]-[A-Za-z0-9\-]{10,})`, nil).near("xox", "xapp-"),
	re( // slack webhook
		`hooks\.slack\.com/(?:services|workflows|triggers)/([A-Za-z0-9/_\-]+)`, nil, 1).near("hooks.slack.com"),
	re( // jwt
		`\beyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}`, nil).near("eyj"),
	re( // hugging face token
		`\bhf_[A-Za-z0-9]{30,}`, nil).near("hf_"),
	re( // npm token
		`\bnpm_[A-Za-z0-9]{30,}`, nil).near("npm_"),
	re( // pypi token
		`\bpypi-[A-Za-z0-9_\-]{50,}`, nil).near("pypi-"),
	re( // sendgrid key
		`\bSG\.[A-Za-z0-9_\-]{16,}\.[A-Za-z0-9_\-]{16,}`, nil).near("sg."),
	re( // digitalocean token
		`\bdo[opr]_v1_[a-f0-9]{64}`, nil).near("_v1_"),
	re( // shopify token
		`\bshp(?:at|ss|ca|pa)_[a-fA-F0-9]{32}`, nil).near("shp"),
	re( // telegram bot token
		`\b[0-9]{8,10}:AA[A-Za-z0-9_\-]{33}\b`, nil).near(":aa"),
	re( // signed url
		`[?&](?:sig|signature|X-Amz-Signature|X-Goog-Signature|access_token|token|key|api_key|apikey)=([^&\s"'#]{8,})`, notTemplate, 1).near("sig", "token=", "key="),

	// Headers and connection strings.
	re( // authorization header
		`(?i)\b(?:proxy-)?authorization\s*["']?\s*[:=]\s*["']?(?:(?:bearer|basic|token|digest|bot|apikey|sso-key)\s+)?([^\s"',;]{6,})`, notTemplate, 1).near("authorization"),
	re( // bearer
		`(?i)\b(?:bearer|basic)\s+([A-Za-z0-9_\-.~+/]{16,}=*)`, nil, 1).near("bearer", "basic"),
	re( // cookie
		`(?i)\b(?:set-)?cookie\s*:\s*([^\r\n]+)`, secretValue, 1).near("cookie"),
	re( // url credential
		`\b[a-zA-Z][a-zA-Z0-9+.\-]*://[^/\s:@]*:([^@\s/]+)@`, notTemplate, 1).near("://"),

	// key = value, key: value, "key": "value" (config files, env, JSON).
	named( // key=value
		lead+`(?:`+keyName+`)["']?\s*(?::=|=>|[:=])\s*`+value, secretValue, valueGroups...).near("pass", "pwd", "secret", "token", "key", "auth", "credential", "kennwort"),

	// Prose: "the password for X is …", "Passwort lautet …", "密码是 …".
	named( // password is
		`(?i)(?:`+lead+`(?:`+passwordWords+`)|密码|密碼|パスワード|비밀번호)`+ofWhat+isWord+value, secretValue, valueGroups...).near("pass", "pw", "mdp", "mot de passe", "contrase", "clave", "senha", "wachtwoord", "has", "salasana", "lösenord", "Lösenord", "passord", "adgangskode", "heslo", "şifre", "Şifre", "sifre", "parola", "jelsz", "lozinka", "api", "access", "auth", "secret", "client", "private", "kennwort", "пароль", "Пароль", "ПАРОЛЬ", "密码", "密碼", "パスワード", "비밀번호"),
	// "pw hunter2", "password Summer2024!": no joining word, so only a value
	// that looks made up (a digit or a sign in it) counts.
	named( // password value
		`(?i)`+lead+`(?:pw|pwd|mdp|password|passwort|kennwort|contraseña|senha|пароль)\s+([^\s"'<>]{4,200})`, madeUp, 1).near("pw", "mdp", "passw", "kennwort", "contrase", "senha", "пароль", "Пароль"),
	// PINs and codes: "PIN 4711", "my pin is 1234", "PIN-Code lautet 0815".
	named( // pin
		`(?i)`+lead+`(?:pin(?:[- ]?(?:code|nummer|number))?|code pin|puk|geheimzahl|cvv2?|cvc|csc|(?:door|alarm|gate|safe|lock|access|entry|security|unlock)\s+code|t(?:ü|u)rcode|zugangscode|sicherheitscode|code d'acc(?:è|e)s|code secret)`+ofWhat+`(?:\s*(?:is|was|lautet|ist|est|es|é|è|:|=|-|#|no\.?)\s*|\s+)(\d{3,12})\b`, nil, 1).near("pin", "puk", "geheimzahl", "cvv", "cvc", "csc", "code", "door", "alarm", "gate", "safe", "lock", "access", "entry", "security", "unlock"),
	// "login: bob / hunter2", "credentials bob:hunter2": the password part.
	named( // login
		`(?i)`+lead+loginWords+`(?:\s+(?:with|as|mit|als|avec|con))?\s*(?:[:=]\s*)?`+userPass, loginSecret, 1).near("log", "sign", "cred", "zugangsdaten", "anmeldedaten", "identifiants", "user", "benutzer"),
	// "the login is bob / hunter22": with a verb between, only a made-up
	// password counts, so "login is slow / broken" stays.
	named( // login is
		`(?i)`+lead+loginWords+`\s+(?:is|are|ist|sind|lautet|lauten|est|sont|es|son)\s+`+userPass,
		func(v string) bool { return loginSecret(v) && madeUp(v) }, 1).near("log", "sign", "cred", "zugangsdaten", "anmeldedaten", "identifiants", "user", "benutzer"),
}

// awsSecrets finds the secret half of an AWS key pair: the value after an
// aws_secret_access_key-like name is the key=value rule's; this one takes a
// standalone 40-character key in a text that also holds an access key id.
func awsSecrets(s string) []span {
	if !strings.Contains(s, "AKIA") && !strings.Contains(s, "ASIA") || !awsIDRe.MatchString(s) {
		return nil
	}
	var out []span
	for _, loc := range base64Run.FindAllStringIndex(s, -1) {
		if w := s[loc[0]:loc[1]]; len(w) == 40 && mixed(w) {
			out = append(out, span{loc[0], loc[1]})
		}
	}
	return out
}

var (
	awsIDRe   = regexp.MustCompile(`\b(?:AKIA|ASIA)[A-Z0-9]{16}\b`)
	base64Run = regexp.MustCompile(`[A-Za-z0-9/+]+`)
)

// mixed reports whether w has upper and lower case letters and a digit or
// a sign: what a generated key has and a word or a hex hash has not.
func mixed(w string) bool {
	var up, low, other bool
	for _, r := range w {
		switch {
		case unicode.IsUpper(r):
			up = true
		case unicode.IsLower(r):
			low = true
		default:
			other = true
		}
	}
	return up && low && other
}

// notWords are what follows "password is" or "token:" in ordinary prose and
// config: no secret, so they stay.
var notWords = map[string]bool{}

func init() {
	for _, w := range strings.Fields(`
		a an the is are was were be been being not no none null nil true false yes ok okay set unset
		empty blank missing required optional needed necessary wrong right correct incorrect invalid
		valid expired weak strong long short too very also still now here there this that it its my
		your his her our their same different secret hidden masked redacted stored saved encrypted
		hashed changed reset sent shown visible safe secure insecure unknown known below above attached
		in on at of for to from with by and or but if when what which who how why where case sensitive
		protected mandatory enabled disabled off default generated random new old mine yours can could
		will would should must may might you we i me he she they them please just only always never
		easy hard simple complex same one two three four five six seven eight nine ten at least most
		see look ask kept used needed lost forgotten stolen leaked printed written typed entered displayed
		ein eine einen einer der die das den dem des ist nicht kein keine falsch richtig korrekt
		ungültig gültig abgelaufen leer zu sehr auch noch jetzt hier dort dies es mein dein sein ihr
		unser geändert gesetzt erforderlich nötig sicher unsicher gespeichert verschlüsselt
		unbekannt bekannt unten oben und oder aber wenn was wie vergessen siehe
		un une le la les est pas faux vrai incorrect invalide expiré vide trop très aussi encore ici
		mon ton son notre votre changé requis obligatoire sûr inconnu et ou mais oublié voir
		el los las es falso verdadero correcto incorrecto inválido caducado vacío demasiado muy también
		aquí mi tu su nuestro cambiado requerido obligatorio seguro secreto desconocido y o pero olvidado
		il lo gli è non sbagliato corretto vuoto troppo molto anche qui
		o os as é não errado correto vazio muito também aqui
		het niet fout leeg te ook hier
		todo todos nada
		****** ********`) {
		notWords[w] = true
	}
}

// secretValue accepts a value that follows a secret's name: not a word of
// prose, not a template or a variable, not a mask someone already typed.
func secretValue(v string) bool {
	t := strings.ToLower(strings.TrimRight(v, ".,;:!?)]}"))
	if len([]rune(t)) < 2 || notWords[t] || strings.Trim(t, "*•x.-_ ") == "" {
		return false
	}
	return notTemplate(t)
}

// notTemplate refuses a placeholder the writer meant to be filled in:
// $VAR, ${VAR}, {{ .Secret }}, <password>, %PASSWORD%, [redacted].
func notTemplate(v string) bool {
	switch {
	case strings.HasPrefix(v, "$"), strings.HasPrefix(v, "{{"), strings.HasPrefix(v, "<"),
		strings.HasPrefix(v, "%"), strings.HasPrefix(v, "["), strings.HasPrefix(v, "(") && strings.HasSuffix(v, ")"):
		return false
	}
	return true
}

// madeUp accepts a word after "pw" or "password" with no joining word only
// when it looks made up: it has a digit or a sign, so "password reset" and
// "password manager" stay.
func madeUp(v string) bool {
	t := strings.TrimRight(v, ".,;:!?)]}")
	if len(t) < 4 || !secretValue(t) || strings.Contains(t, "://") {
		return false
	}
	return strings.ContainsFunc(t, func(r rune) bool { return !unicode.IsLetter(r) && r != '-' && r != '\'' })
}

// loginSecret refuses what a URL's "https://host" would put in the
// password's place.
func loginSecret(v string) bool {
	return !strings.HasPrefix(v, "/") && secretValue(v)
}
