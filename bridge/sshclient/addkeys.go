package sshclient

import (
	"bytes"
	"encoding/binary"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"

	"golang.org/x/crypto/ssh/agent"
)

const opensshKeyMagic = "openssh-key-v1\x00"

var errNoComment = errors.New("no readable comment")

// keyComment is the comment ssh's sshkey_load_private_type returns for a
// private key file: an unencrypted OpenSSH key's own (possibly empty),
// none (ok false, nil error) for the PEM formats, which keep none.
// An encrypted OpenSSH key's is errNoComment: it is in the encrypted part.
func keyComment(data []byte) (comment string, ok bool, err error) {
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "OPENSSH PRIVATE KEY" {
		return "", false, nil
	}
	defer clear(block.Bytes)
	b, found := bytes.CutPrefix(block.Bytes, []byte(opensshKeyMagic))
	if !found {
		return "", false, errNoComment
	}
	r := &wireReader{b: b}
	cipher := r.str()
	r.str() // kdf name
	r.str() // kdf options
	n := r.u32()
	for i := uint32(0); i < n && r.err == nil; i++ {
		r.str() // public key
	}
	priv := r.str()
	if r.err != nil || n != 1 || string(cipher) != "none" {
		return "", false, errNoComment
	}
	r = &wireReader{b: priv}
	r.u32() // check ints
	r.u32()
	// The private fields of each type sshkey_private_serialize writes.
	fields := map[string]int{"ssh-ed25519": 2, "ssh-rsa": 6, "ssh-dss": 5}
	typ := string(r.str())
	k, known := fields[typ]
	if !known && len(typ) > 11 && typ[:11] == "ecdsa-sha2-" {
		k, known = 3, true // curve, public point, private scalar
	}
	if !known {
		return "", false, errNoComment
	}
	for range k {
		r.str()
	}
	c := r.str()
	if r.err != nil {
		return "", false, errNoComment
	}
	return string(c), true, nil
}

// encryptedOpenSSHKey tells whether path holds an OpenSSH format key
// whose private part (and comment) is encrypted.
func encryptedOpenSSHKey(path string) bool {
	data, err := os.ReadFile(path)
	if err != nil {
		return false
	}
	defer clear(data)
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "OPENSSH PRIVATE KEY" {
		return false
	}
	b, found := bytes.CutPrefix(block.Bytes, []byte(opensshKeyMagic))
	if !found {
		return false
	}
	r := &wireReader{b: b}
	cipher := r.str()
	return r.err == nil && string(cipher) != "none"
}

// wireReader reads SSH wire strings and integers, remembering the first
// error.
type wireReader struct {
	b   []byte
	err error
}

func (r *wireReader) u32() uint32 {
	if r.err != nil || len(r.b) < 4 {
		r.err = errNoComment
		return 0
	}
	v := binary.BigEndian.Uint32(r.b)
	r.b = r.b[4:]
	return v
}

func (r *wireReader) str() []byte {
	n := r.u32()
	if r.err != nil || uint64(n) > uint64(len(r.b)) {
		r.err = errNoComment
		return nil
	}
	s := r.b[:n]
	r.b = r.b[n:]
	return s
}

// addToAgent is sshconnect.c's maybe_add_key_to_agent for a key just
// loaded from id's file (data): AddKeysToAgent's lifespan and confirm,
// the key's comment or, without one, the file's name. As with ssh, a
// failure is only logged.
func (a *authState) addToAgent(id *identity, raw any, data []byte) {
	if a.s.AddKeysToAgent == "" || a.s.AgentSock == "" {
		return
	}
	comment, ok, err := keyComment(data)
	if err != nil {
		a.log.WithError(err).WithField("key", id.name).Debug("not adding the key to the agent")
		return
	}
	if !ok {
		comment = id.name
	}
	var d net.Dialer
	conn, err := d.DialContext(a.ctx, "unix", a.s.Env.abs(a.s.AgentSock))
	if err != nil {
		a.log.WithError(err).Debug("no ssh-agent, not adding the key")
		return
	}
	defer conn.Close()
	offStack(func() {
		err = agent.NewClient(conn).Add(agent.AddedKey{
			PrivateKey:       raw,
			Comment:          comment,
			LifetimeSecs:     a.s.AddKeysLifetime,
			ConfirmBeforeUse: a.s.AddKeysToAgent == "confirm",
		})
	})
	if err != nil {
		a.log.WithError(fmt.Errorf("adding %s to the agent: %w", id.name, err)).Debug("could not add identity to agent")
		return
	}
	a.log.WithField("key", id.name).Debug("identity added to agent")
}
