package sshclient

import (
	"net"
	"strconv"
	"strings"

	"github.com/ansible-bridge/ansible-bridge/fakessh/sshconf"
)

// hostName is the host ssh connects to and names everywhere after
// reading its configuration (%h, %C, known_hosts, prompts), as ssh.c's
// main makes it: HostName with %h expanded (else the destination), then
// a name lower-cased, or an address canonicalised by resolve_addr. A
// scoped IPv6 address (with '%') is left as given: ssh would write it as
// getnameinfo does, which the bridge does not reproduce.
func (r *resolver) hostName() (host string, scoped bool, err error) {
	host = r.hostArg
	if hn, ok := r.vals["hostname"]; ok {
		if host, err = percentExpand(hn, tokens{'h': r.hostArg}, hostnameTokens, false, nil); err != nil {
			return "", false, err
		}
	}
	host, _ = resolveAddr(host, r.vals["addressfamily"])
	return host, strings.Contains(host, "%"), nil
}

// resolveAddr is ssh.c's is_addr and resolve_addr (CanonicalizeHostname
// no, the only value the bridge serves): a host that getaddrinfo reads
// as a numeric address of the AddressFamily is replaced by getnameinfo's
// NI_NUMERICHOST text, unless the two differ only in case ("127.1" is
// "127.0.0.1", "2001:DB8::1" stays); a host that is no address is
// lower-cased. addr reports what ssh takes for an address (any host
// with ':' or '%', or of digits and dots only), which it never
// lower-cases.
func resolveAddr(host, family string) (name string, addr bool) {
	addr = strings.ContainsAny(host, ":%") || strings.Trim(host, "0123456789.") == ""
	var canon string
	if !strings.Contains(host, "%") {
		if ip := numericHost(host); ip != nil {
			// getaddrinfo reads an IPv6 address only where there is a
			// ':' (inet_aton never does), each for its family only.
			v6 := strings.Contains(host, ":")
			switch {
			case v6 && family != "inet":
				canon = ntop6(ip.To16())
			case !v6 && family != "inet6":
				canon = ip.To4().String()
			}
		}
	}
	if canon == "" {
		if addr {
			return host, true
		}
		return sshconf.Lower(host), false
	}
	if strings.EqualFold(host, canon) {
		return host, true
	}
	return canon, true
}

// ntop6 is glibc's inet_ntop for AF_INET6: lower-case hex, the first
// longest run of two or more zero groups as "::", and the last 32 bits
// dotted after 96 zero bits (but for ::1 and ::) or after ::ffff:.
func ntop6(ip net.IP) string {
	var w [8]int
	for i := range w {
		w[i] = int(ip[2*i])<<8 | int(ip[2*i+1])
	}
	best, bestLen, cur, curLen := -1, 0, -1, 0
	for i := 0; i <= 8; i++ {
		if i < 8 && w[i] == 0 {
			if cur < 0 {
				cur, curLen = i, 0
			}
			curLen++
			continue
		}
		if cur >= 0 && (best < 0 || curLen > bestLen) {
			best, bestLen = cur, curLen
		}
		cur = -1
	}
	if bestLen < 2 {
		best = -1
	}
	var b strings.Builder
	for i := 0; i < 8; i++ {
		if best >= 0 && i >= best && i < best+bestLen {
			if i == best {
				b.WriteByte(':')
			}
			continue
		}
		if i != 0 {
			b.WriteByte(':')
		}
		if i == 6 && best == 0 && (bestLen == 6 || (bestLen == 5 && w[5] == 0xffff)) {
			b.WriteString(net.IP(ip[12:16]).String())
			return b.String()
		}
		b.WriteString(strconv.FormatInt(int64(w[i]), 16))
	}
	if best >= 0 && best+bestLen == 8 {
		b.WriteByte(':')
	}
	return b.String()
}
