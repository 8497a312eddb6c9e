package redact

import (
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// Each positive case names the secret that must not survive and a piece of
// the text around it that must.
func TestMaskHidesSecrets(t *testing.T) {
	cases := map[string]struct{ in, secret, keep string }{
		// Vendors' tokens.
		"openai key":        {"my key is sk-proj-abcdefghijklmnopqrstuvwx ok", "abcdefghijklmnop", "my key is"},
		"anthropic key":     {"use sk-ant-api03-AAAAAAAAAAAAAAAAAAAAAAAA now", "AAAAAAAAAAAAAAAA", "now"},
		"stripe live":       {"charge with sk_live_51HabcdefGHIJKLmnop", "51HabcdefGHIJKLmnop", "charge with"},
		"stripe restricted": {"rk_live_abcdefghijklmnop is read-only", "abcdefghijklmnop", "is read-only"},
		"stripe test":       {"sk_test_4eC39HqLyjWDarjtT1zdp7dc", "4eC39HqLyjWDarjtT1zdp7dc", ""},
		"stripe webhook":    {"whsec_abcdefghijklmnopqrstu", "abcdefghijklmnopqrstu", ""},
		"aws id":            {"AKIAIOSFODNN7EXAMPLE is the id", "AKIAIOSFODNN7EXAMPLE", "is the id"},
		"aws secret named":  {"aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "wJalrXUtnFEMI", "aws_secret_access_key ="},
		"aws secret prose":  {"AWS Secret Access Key: wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "wJalrXUtnFEMI", "AWS Secret Access Key"},
		"aws pair":          {"id AKIAIOSFODNN7EXAMPLE and wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "bPxRfiCYEXAMPLEKEY", "and"},
		"github":            {"token ghp_abcdefghijklmnopqrstuvwxyz0123", "ghp_abcdefghijklmnopqrstuvwxyz0123", "token"},
		"github pat":        {"github_pat_11ABCDEFG0123456789_abcdefghijklmnop", "11ABCDEFG0123456789", ""},
		"gitlab":            {"glpat-abcdefghij0123456789 for CI", "abcdefghij0123456789", "for CI"},
		"slack bot":         {"xoxb-123456789012-1234567890123-abcdefghijklmnop", "abcdefghijklmnop", ""},
		"slack webhook":     {"post to https://hooks.slack.com/services/T000/B000/XXXXXXXXXXXX", "XXXXXXXXXXXX", "hooks.slack.com"},
		"google key":        {"AIzaSyA1234567890abcdefghijklmnopqrstu", "1234567890abcdefghij", ""},
		"hugging face":      {"hf_abcdefghijklmnopqrstuvwxyz0123456", "abcdefghijklmnopqrstuvwxyz", ""},
		"jwt":               {"eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U", "dozjgNryP4J3jVmNHl0w5N", ""},
		"private key":       {"-----BEGIN RSA PRIVATE KEY-----\nMIIEow\n-----END RSA PRIVATE KEY-----\nafter", "MIIEow", "after"},
		"openssh key":       {"-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXk\n-----END OPENSSH PRIVATE KEY-----", "b3BlbnNzaC1rZXk", ""},
		"pgp key":           {"-----BEGIN PGP PRIVATE KEY BLOCK-----\nlQOYBF\n-----END PGP PRIVATE KEY BLOCK-----", "lQOYBF", ""},
		"cut private key":   {"-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEI", "MHcCAQEEI", ""},
		"telegram":          {"bot 123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw0", "AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw0", "bot"},
		"signed url":        {"https://s3.example.com/f?X-Amz-Signature=abcdef0123456789&x=1", "abcdef0123456789", "x=1"},
		// Headers and connection strings.
		"bearer":         {"Authorization: Bearer abcdefghijklmnopqrstu", "abcdefghijklmnopqrstu", "Authorization"},
		"basic":          {"Authorization: Basic dXNlcjpodW50ZXIy", "dXNlcjpodW50ZXIy", "Authorization"},
		"api key header": {"X-Api-Key: 9f8e7d6c5b4a", "9f8e7d6c5b4a", "X-Api-Key"},
		"cookie":         {"Cookie: session=abc123def456", "abc123def456", "Cookie"},
		"postgres url":   {"postgres://bob:s3cretpw@db/x", "s3cretpw", "postgres://bob:"},
		"redis url":      {"redis://:hunter22@cache:6379", "hunter22", "cache:6379"},
		"ado string":     {"Server=db;User Id=sa;Password=Pa55w0rd;", "Pa55w0rd", "Server=db"},
		// key=value in config, env and JSON.
		"env":           {"export OPENAI_API_KEY=abc123def456ghi", "abc123def456ghi", "export"},
		"json":          {`{"user":"bob","password":"hunter2"}`, "hunter2", `"user":"bob"`},
		"yaml":          {"db_password: correcthorse", "correcthorse", "db_password"},
		"camel":         {"accessToken=qwertyuiop123", "qwertyuiop123", "accessToken"},
		"client secret": {"client_secret=Zx9-Qw8_Er7", "Zx9-Qw8_Er7", "client_secret"},
		// Prose, in the person's words.
		"password is":         {"the password is hunter2!!", "hunter2", "the password is"},
		"password for x is":   {"The password for the staging db is Tr0ub4dor&3 now", "Tr0ub4dor", "staging db"},
		"password plain word": {"my password is swordfish", "swordfish", "my password is"},
		"password quoted":     {`the password is "correct horse battery staple"`, "horse battery", "the password is"},
		"password colon":      {"Password: hunter2", "hunter2", "Password"},
		"password's":          {"my password's tiger99", "tiger99", "my password"},
		"password no verb":    {"username bob password Summer2024!", "Summer2024", "username bob"},
		"pw":                  {"pw hunter2 for the wifi", "hunter2", "for the wifi"},
		"pw colon":            {"PW: geheim", "geheim", "PW"},
		"passwort lautet":     {"Das Passwort lautet Sommer2024", "Sommer2024", "Das Passwort lautet"},
		"passwort für":        {"Das Passwort für das WLAN ist blaubeere", "blaubeere", "WLAN"},
		"kennwort":            {"Kennwort: Bienchen", "Bienchen", "Kennwort"},
		"mot de passe":        {"Le mot de passe est soleil42", "soleil42", "Le mot de passe"},
		"mot de passe pour":   {"le mot de passe pour le wifi est framboise", "framboise", "wifi"},
		"mdp":                 {"mdp : chaton77", "chaton77", "mdp"},
		"contraseña":          {"La contraseña es gato123", "gato123", "La contraseña"},
		"contraseña de":       {"la contraseña de mi cuenta es perrito", "perrito", "mi cuenta"},
		"senha":               {"A senha é banana99", "banana99", "A senha"},
		"password è":          {"la password è girasole", "girasole", "la password"},
		"wachtwoord":          {"het wachtwoord is fiets2020", "fiets2020", "wachtwoord"},
		"hasło":               {"hasło: kotek123", "kotek123", "hasło"},
		"пароль":              {"пароль: медведь77", "медведь77", "пароль"},
		"密码":                  {"我的密码是abc12345", "abc12345", "我的密码"},
		"api key is":          {"the API key is 8f14e45fceea167a5a36", "8f14e45fceea167a5a36", "the API key is"},
		// PINs and codes.
		"pin":          {"PIN 4711", "4711", "PIN"},
		"my pin is":    {"my pin is 1234, ok", "1234", "my pin is"},
		"pin code":     {"PIN-Code lautet 0815", "0815", "PIN-Code"},
		"pin for card": {"the PIN for my debit card is 9876", "9876", "debit card"},
		"code pin":     {"mon code PIN est 2580", "2580", "code PIN"},
		"door code":    {"the door code is 1984", "1984", "door code"},
		"cvv":          {"CVV: 123", "123", "CVV"},
		// Logins.
		"login slash":   {"login: bob / hunter2", "hunter2", "login: bob"},
		"login colon":   {"credentials admin:Passw0rd", "Passw0rd", "admin"},
		"user/password": {"user/password: alice/wonderland9", "wonderland9", "user/password"},
		"login is":      {"the login is bob / hunter22", "hunter22", "the login is bob"},
		"zugangsdaten":  {"Zugangsdaten: max / geheim123", "geheim123", "max"},
		"legacy hashed": {"key [secret:api-key:1a2b3c] kept", "1a2b3c", "kept"},
		"two in a line": {"pw: alpha1 and PIN 5555", "alpha1", " and PIN "},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			once := Mask(tc.in)
			if strings.Contains(once, tc.secret) {
				t.Fatalf("secret survived: %q", once)
			}
			if !strings.Contains(once, "[secret-1]") {
				t.Fatalf("no placeholder: %q", once)
			}
			if tc.keep != "" && tc.keep != tc.secret && !strings.Contains(once, tc.keep) {
				t.Fatalf("%q was masked too: %q", tc.keep, once)
			}
			if twice := Mask(once); twice != once {
				t.Fatalf("masking again changed it: %q → %q", once, twice)
			}
		})
	}
}

func TestMaskLeavesProseAndNonSecrets(t *testing.T) {
	cases := []string{
		"Please reset your password and pick a strong one.",
		"The password is required for login.",
		"Passwords must be at least 12 characters long.",
		"My password is not working since yesterday.",
		"Is the password correct?",
		"I use a password manager like 1Password.",
		"Das Passwort ist falsch.",
		"Le mot de passe est incorrect.",
		"La contraseña es demasiado corta.",
		"The PIN has four digits.",
		"Connect pin 13 to ground.",
		"The server answered error code 404.",
		"max_tokens: 1024",
		"token count: 12",
		"bypass: none",
		"compass: north",
		"the secret is to stir slowly",
		"The login page is at https://example.com/login",
		"sign-in: https://accounts.example.com/",
		"A JWT is header.payload.signature, base64url encoded.",
		"Access key ids start with AKIA; commit 3f2c9a1e8b7d6c5f4e3d2c1b0a9f8e7d6c5b4a3f",
		"scikit-learn (sk-learn) is a library",
		"risk-assessment-framework-2024 and task-management-system-v2",
		"password: ${DB_PASSWORD}",
		"api_key: <your key here>",
		"password = ********",
		"secret: true",
		"Call me at 555-1234 about order 48213.",
		"https://example.com/search?q=tokens&page=2",
		"login is slow / broken",
		"password: see the vault",
		"cookie: none",
		"Who can pass 2024 exams?",
		"The token expires in 3600 seconds.",
		"PIN entry failed 3 times",
		"a password-protected zip",
		"Der Token ist abgelaufen.",
	}
	for _, in := range cases {
		if got := Mask(in); got != in {
			t.Errorf("Mask(%q) = %q, want it unchanged", in, got)
		}
	}
}

func TestMaskNumbersSecretsInOrderAndSharesNumbers(t *testing.T) {
	m := NewMasker("summary so far: the db password [secret-2] was changed")
	got := []string{
		m.Mask("key sk-proj-aaaaaaaaaaaaaaaaaaaaaaaa and PIN 4711"),
		m.Mask("again sk-proj-aaaaaaaaaaaaaaaaaaaaaaaa"),
	}
	want := []string{"key [secret-3] and PIN [secret-4]", "again [secret-3]"}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("text %d: %q, want %q", i, got[i], want[i])
		}
	}
	// The placeholder is the same for any secret in the same place: it
	// carries nothing of the secret.
	if Mask("PIN 1111") != Mask("PIN 2222") {
		t.Errorf("two PINs mask differently: %q, %q", Mask("PIN 1111"), Mask("PIN 2222"))
	}
}

func TestMaskIsIdempotent(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := rapid.StringMatching(`((my|the) (password|pin|pw|passwort|token|key) (is|=|:|lautet) [a-zA-Z0-9!]{2,20} |sk-[a-zA-Z0-9]{16,30} |AKIA[A-Z0-9]{16} |[A-Za-z0-9/+]{40} |login: [a-z]{1,5} / [a-z0-9]{2,8} |plain words |\[secret-[0-9]\] |\[secret:api-key:0a1b2c\] |PIN [0-9]{2,6} |https://[a-z]{1,4}:[a-z]{1,6}@h/ )*`).Draw(t, "text")
		once := Mask(s)
		if Mask(once) != once {
			t.Fatalf("Mask(Mask(%q)) = %q != %q", s, Mask(once), once)
		}
	})
}
