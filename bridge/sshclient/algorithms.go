package sshclient

import (
	"fmt"
	"slices"
	"strings"

	"golang.org/x/crypto/ssh"
)

// algoKind is one of the algorithm lists ssh_config can set: OpenSSH
// 9.2's default and every name it knows (ssh -Q), and what x/crypto
// implements.
type algoKind struct {
	keyword  string // ssh_config keyword, lower case
	name     string // as OpenSSH's "Bad SSH2 ... spec" message names it
	defaults []string
	all      []string
	// wildcards: HostKeyAlgorithms takes patterns in every form; the
	// others only in a "-" list.
	wildcards bool
	// ofKind picks this kind's names out of x/crypto's Algorithms; alias
	// holds names x/crypto implements without listing them.
	ofKind func(ssh.Algorithms) []string
	alias  []string
}

var (
	algoCiphers = algoKind{keyword: "ciphers", name: "cipher",
		ofKind:   func(a ssh.Algorithms) []string { return a.Ciphers },
		defaults: strings.Split("chacha20-poly1305@openssh.com,aes128-ctr,aes192-ctr,aes256-ctr,aes128-gcm@openssh.com,aes256-gcm@openssh.com", ","),
		all:      strings.Split("3des-cbc,aes128-cbc,aes192-cbc,aes256-cbc,aes128-ctr,aes192-ctr,aes256-ctr,aes128-gcm@openssh.com,aes256-gcm@openssh.com,chacha20-poly1305@openssh.com", ","),
	}
	algoMACs = algoKind{keyword: "macs", name: "MAC",
		ofKind:   func(a ssh.Algorithms) []string { return a.MACs },
		defaults: strings.Split("umac-64-etm@openssh.com,umac-128-etm@openssh.com,hmac-sha2-256-etm@openssh.com,hmac-sha2-512-etm@openssh.com,hmac-sha1-etm@openssh.com,umac-64@openssh.com,umac-128@openssh.com,hmac-sha2-256,hmac-sha2-512,hmac-sha1", ","),
		all:      strings.Split("hmac-sha1,hmac-sha1-96,hmac-sha2-256,hmac-sha2-512,hmac-md5,hmac-md5-96,umac-64@openssh.com,umac-128@openssh.com,hmac-sha1-etm@openssh.com,hmac-sha1-96-etm@openssh.com,hmac-sha2-256-etm@openssh.com,hmac-sha2-512-etm@openssh.com,hmac-md5-etm@openssh.com,hmac-md5-96-etm@openssh.com,umac-64-etm@openssh.com,umac-128-etm@openssh.com", ","),
	}
	algoKex = algoKind{keyword: "kexalgorithms", name: "KexAlgorithms",
		ofKind:   func(a ssh.Algorithms) []string { return a.KeyExchanges },
		alias:    []string{"curve25519-sha256@libssh.org"}, // of curve25519-sha256
		defaults: strings.Split("sntrup761x25519-sha512,sntrup761x25519-sha512@openssh.com,curve25519-sha256,curve25519-sha256@libssh.org,ecdh-sha2-nistp256,ecdh-sha2-nistp384,ecdh-sha2-nistp521,diffie-hellman-group-exchange-sha256,diffie-hellman-group16-sha512,diffie-hellman-group18-sha512,diffie-hellman-group14-sha256", ","),
		all:      strings.Split("diffie-hellman-group1-sha1,diffie-hellman-group14-sha1,diffie-hellman-group14-sha256,diffie-hellman-group16-sha512,diffie-hellman-group18-sha512,diffie-hellman-group-exchange-sha1,diffie-hellman-group-exchange-sha256,ecdh-sha2-nistp256,ecdh-sha2-nistp384,ecdh-sha2-nistp521,curve25519-sha256,curve25519-sha256@libssh.org,sntrup761x25519-sha512,sntrup761x25519-sha512@openssh.com,mlkem768x25519-sha256", ","),
	}
	algoHostKeys = algoKind{keyword: "hostkeyalgorithms", name: "HostKeyAlgorithms", wildcards: true,
		ofKind:   func(a ssh.Algorithms) []string { return a.HostKeys },
		defaults: opensshHostKeyAlgos,
		all:      allKeyAlgos,
	}
	// The bridge does not filter identities nor CA signatures by these
	// two: only their default is served (policyServed).
	algoPubkey = algoKind{keyword: "pubkeyacceptedalgorithms", name: "PubkeyAcceptedAlgorithms", wildcards: true,
		defaults: opensshHostKeyAlgos, // KEX_DEFAULT_PK_ALG, as HostKeyAlgorithms
		all:      allKeyAlgos,
	}
	algoCASig = algoKind{keyword: "casignaturealgorithms", name: "CASignatureAlgorithms", wildcards: true,
		defaults: strings.Split("ssh-ed25519,ecdsa-sha2-nistp256,ecdsa-sha2-nistp384,ecdsa-sha2-nistp521,sk-ssh-ed25519@openssh.com,sk-ecdsa-sha2-nistp256@openssh.com,rsa-sha2-512,rsa-sha2-256", ","),
		all:      slices.DeleteFunc(slices.Clone(allKeyAlgos), func(a string) bool { return strings.Contains(a, "-cert-") }),
	}
)

// allKeyAlgos is sshkey_alg_list's every key and signature name, as
// OpenSSH 9.2 on Debian lists them (ssh -Q key-sig).
var allKeyAlgos = strings.Split("ssh-ed25519,ssh-ed25519-cert-v01@openssh.com,sk-ssh-ed25519@openssh.com,sk-ssh-ed25519-cert-v01@openssh.com,ecdsa-sha2-nistp256,ecdsa-sha2-nistp256-cert-v01@openssh.com,ecdsa-sha2-nistp384,ecdsa-sha2-nistp384-cert-v01@openssh.com,ecdsa-sha2-nistp521,ecdsa-sha2-nistp521-cert-v01@openssh.com,sk-ecdsa-sha2-nistp256@openssh.com,sk-ecdsa-sha2-nistp256-cert-v01@openssh.com,webauthn-sk-ecdsa-sha2-nistp256@openssh.com,ssh-dss,ssh-dss-cert-v01@openssh.com,ssh-rsa,ssh-rsa-cert-v01@openssh.com,rsa-sha2-256,rsa-sha2-256-cert-v01@openssh.com,rsa-sha2-512,rsa-sha2-512-cert-v01@openssh.com", ",")

// policyServed tells whether spec, set for kind k, leaves OpenSSH with
// k's default list: the only value the bridge reproduces.
func (k *algoKind) policyServed(spec string) bool {
	list, ok := k.assemble(spec)
	return ok && slices.Equal(list, k.defaults)
}

// implemented lists what x/crypto can negotiate of kind k (the insecure
// ones included: a user who lists them asked for them).
func (k *algoKind) implemented() []string {
	return slices.Concat(k.ofKind(ssh.SupportedAlgorithms()), k.ofKind(ssh.InsecureAlgorithms()), k.alias)
}

// assemble computes the list OpenSSH would use for spec, as its
// kex_assemble_names does: "+list" appends to the default, "-list"
// removes what matches from it, "^list" puts the list first, anything
// else replaces it; patterns (* and ?) expand against every known name.
// ok is false where OpenSSH refuses the spec (a name it does not know).
func (k *algoKind) assemble(spec string) (names []string, ok bool) {
	if spec == "" {
		return nil, false
	}
	if spec[0] == '-' {
		pats := strings.Split(spec[1:], ",")
		return slices.DeleteFunc(slices.Clone(k.defaults), func(a string) bool {
			return slices.ContainsFunc(pats, func(p string) bool { return matchPattern(a, p) })
		}), true
	}
	list := spec
	switch spec[0] {
	case '+', '^':
		list = spec[1:]
	}
	names = strings.Split(list, ",")
	for _, n := range names {
		if !slices.Contains(k.all, n) && !(k.wildcards && strings.ContainsAny(n, "*?")) {
			return nil, false
		}
	}
	switch spec[0] {
	case '+':
		names = appendNew(slices.Clone(k.defaults), names)
	case '^':
		names = appendNew(names, k.defaults)
	}
	var out []string
	for _, p := range names {
		for _, a := range k.all {
			if matchPattern(a, p) {
				out = appendNew(out, []string{a})
			}
		}
	}
	return out, len(out) > 0
}

// appendNew appends the names of b that a does not hold yet.
func appendNew(a, b []string) []string {
	for _, n := range b {
		if !slices.Contains(a, n) {
			a = append(a, n)
		}
	}
	return a
}

// algorithms resolves kind k from the configured value (ok false: not
// set, x/crypto's defaults apply). It returns the names x/crypto
// implements, in OpenSSH's order, or a note for Settings.Unsupported when
// the bridge cannot honour the setting: a name OpenSSH refuses (the real
// ssh then prints its own message) or a list of which x/crypto implements
// nothing.
func (k *algoKind) algorithms(value string, ok bool) (names []string, note string) {
	if !ok {
		return nil, ""
	}
	list, valid := k.assemble(value)
	if !valid {
		return nil, fmt.Sprintf("Bad SSH2 %s spec '%s'", k.name, value)
	}
	impl := k.implemented()
	names = slices.DeleteFunc(list, func(a string) bool { return !slices.Contains(impl, a) })
	if len(names) == 0 {
		return nil, fmt.Sprintf("%s %s: none implemented by the bridge", k.name, value)
	}
	return names, ""
}
