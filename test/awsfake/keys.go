package awsfake

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"strings"

	"golang.org/x/crypto/ssh"
)

// generatedKey is a fresh key pair as CreateKeyPair hands it out.
type generatedKey struct {
	privatePEM    string // the key material, returned once and never stored
	authorizedKey string // "ssh-rsa AAAA... name" for the host's authorized_keys
	fingerprint   string
}

// generateKeyPair makes a real key of the requested type, in the formats EC2
// uses: RSA as a PKCS#1 PEM ("BEGIN RSA PRIVATE KEY") fingerprinted by the
// SHA-1 of its PKCS#8 DER, ed25519 as an OpenSSH private key fingerprinted
// by the base64 SHA-256 of its public key.
func generateKeyPair(keyType, name string) (generatedKey, error) {
	var (
		priv any
		out  generatedKey
	)
	switch keyType {
	case "rsa":
		k, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			return out, err
		}
		priv = k
		out.privatePEM = string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)}))
		der, err := x509.MarshalPKCS8PrivateKey(k)
		if err != nil {
			return out, err
		}
		sum := sha1.Sum(der)
		hexes := make([]string, len(sum))
		for i, b := range sum {
			hexes[i] = fmt.Sprintf("%02x", b)
		}
		out.fingerprint = strings.Join(hexes, ":")
	case "ed25519":
		_, k, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			return out, err
		}
		priv = k
		block, err := ssh.MarshalPrivateKey(k, "")
		if err != nil {
			return out, err
		}
		out.privatePEM = string(pem.EncodeToMemory(block))
	default:
		return out, fmt.Errorf("key type %q: want rsa or ed25519", keyType)
	}
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		return out, err
	}
	pub := signer.PublicKey()
	if keyType == "ed25519" {
		sum := sha256.Sum256(pub.Marshal())
		out.fingerprint = base64.StdEncoding.EncodeToString(sum[:])
	}
	// AWS writes the key pair's name as the comment of the public key.
	out.authorizedKey = strings.TrimSpace(string(ssh.MarshalAuthorizedKey(pub))) + " " + sanitizeComment(name)
	return out, nil
}

// sanitizeComment keeps an authorized_keys comment on one line.
func sanitizeComment(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return '_'
		}
		return r
	}, s)
}
