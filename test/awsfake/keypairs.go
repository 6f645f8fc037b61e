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
	"encoding/xml"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"

	"golang.org/x/crypto/ssh"
)

// KeyPair is one key pair. The private key is handed out once, by
// CreateKeyPair, and never stored.
type KeyPair struct {
	ID          string            `json:"id"`
	Name        string            `json:"name"`
	Type        string            `json:"type"`
	Fingerprint string            `json:"fingerprint"`
	PublicKey   string            `json:"public_key"` // OpenSSH authorized_keys line
	CreateTime  string            `json:"create_time"`
	Tags        map[string]string `json:"tags,omitempty"`
}

// KeyPairInput is the decoded form of CreateKeyPair and DeleteKeyPair.
type KeyPairInput struct {
	KeyName   string
	KeyPairID string
	KeyType   string // "rsa" or "ed25519"
	KeyFormat string // "pem" or "ppk"
	TagSpecs  []TagSpecification
}

var keyNameShape = regexp.MustCompile(`^[\x20-\x7e]{1,255}$`)

// ParseCreateKeyPair decodes CreateKeyPair.
func ParseCreateKeyPair(form url.Values) (KeyPairInput, error) {
	in := KeyPairInput{KeyName: form.Get("KeyName"), KeyType: orDefault(form.Get("KeyType"), "rsa"), KeyFormat: orDefault(form.Get("KeyFormat"), "pem")}
	if in.KeyName == "" {
		return in, inputError("MissingParameter", "The request must contain the parameter KeyName")
	}
	if !keyNameShape.MatchString(in.KeyName) {
		return in, inputError("InvalidKeyPair.Format", "Key pair name %q must be 1 to 255 printable ASCII characters", in.KeyName)
	}
	if in.KeyType != "rsa" && in.KeyType != "ed25519" {
		return in, inputError("InvalidParameterValue", "Value (%s) for parameter keyType is invalid. Valid values: rsa, ed25519", in.KeyType)
	}
	if in.KeyFormat != "pem" && in.KeyFormat != "ppk" {
		return in, inputError("InvalidParameterValue", "Value (%s) for parameter keyFormat is invalid. Valid values: pem, ppk", in.KeyFormat)
	}
	if in.KeyFormat == "ppk" {
		return in, inputError("InvalidParameterValue", "the fake EC2 endpoint creates pem key pairs only; ask for KeyFormat pem")
	}
	var err error
	in.TagSpecs, err = parseTagSpecifications(form, "key-pair")
	return in, err
}

// ParseDeleteKeyPair decodes DeleteKeyPair (KeyName or KeyPairId).
func ParseDeleteKeyPair(form url.Values) (KeyPairInput, error) {
	in := KeyPairInput{KeyName: form.Get("KeyName"), KeyPairID: form.Get("KeyPairId")}
	if in.KeyName == "" && in.KeyPairID == "" {
		return in, inputError("MissingParameter", "The request must contain the parameter KeyName or KeyPairId")
	}
	if in.KeyPairID != "" {
		if err := checkID(in.KeyPairID, "key", "InvalidKeyPair.Malformed"); err != nil {
			return in, err
		}
	}
	return in, nil
}

// DescribeKeyPairsInput is the decoded form of DescribeKeyPairs.
type DescribeKeyPairsInput struct {
	KeyNames   []string
	KeyPairIDs []string
	Filters    []Filter
}

var keyPairFilters = map[string]bool{"key-name": true, "key-pair-id": true, "fingerprint": true, "tag-key": true}

// ParseDescribeKeyPairs decodes DescribeKeyPairs.
func ParseDescribeKeyPairs(form url.Values) (DescribeKeyPairsInput, error) {
	d, err := parseDescribe(form, describeParams{idParam: "KeyPairId", idPrefix: "key", malformedCode: "InvalidKeyPair.Malformed",
		filters: keyPairFilters, tagFilters: true})
	return DescribeKeyPairsInput{KeyNames: indexedList(form, "KeyName"), KeyPairIDs: d.IDs, Filters: d.Filters}, err
}

func (s *Server) createKeyPair(region string, in KeyPairInput) response {
	s.mu.Lock()
	exists := s.region(region).keyPairs[in.KeyName] != nil
	s.mu.Unlock()
	if exists {
		return badRequest("InvalidKeyPair.Duplicate", "The keypair '%s' already exists.", in.KeyName)
	}
	// Key generation takes a while for RSA; do it outside the lock.
	key, err := generateKeyPair(in.KeyType, in.KeyName)
	if err != nil {
		return ec2Error(http.StatusInternalServerError, "InternalError", "generating the key pair: "+err.Error())
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rd := s.region(region)
	if rd.keyPairs[in.KeyName] != nil {
		return badRequest("InvalidKeyPair.Duplicate", "The keypair '%s' already exists.", in.KeyName)
	}
	kp := &KeyPair{ID: s.newID("key"), Name: in.KeyName, Type: in.KeyType, Fingerprint: key.fingerprint,
		PublicKey: key.authorizedKey, CreateTime: ec2Time(s.now())}
	applyTags(&kp.Tags, tagsFor(in.TagSpecs, "key-pair"))
	rd.keyPairs[kp.Name] = kp
	return xmlOK(xmlCreateKeyPair{ec2Meta: meta(), KeyName: kp.Name, KeyFingerprint: kp.Fingerprint, KeyMaterial: key.privatePEM,
		KeyPairID: kp.ID, TagSet: xmlTags(kp.Tags)})
}

func (s *Server) keyPairByID(rd *regionData, id string) *KeyPair {
	for _, kp := range rd.keyPairs {
		if kp.ID == id {
			return kp
		}
	}
	return nil
}

func (s *Server) deleteKeyPair(region string, in KeyPairInput) response {
	s.mu.Lock()
	defer s.mu.Unlock()
	rd := s.region(region)
	kp := rd.keyPairs[in.KeyName]
	if in.KeyPairID != "" {
		kp = s.keyPairByID(rd, in.KeyPairID)
	}
	// EC2 answers success for a key pair that does not exist.
	out := xmlDeleteKeyPair{ec2Meta: meta(), Return: true}
	if kp != nil {
		delete(rd.keyPairs, kp.Name)
		out.KeyPairID = kp.ID
	}
	return xmlOK(out)
}

func (s *Server) describeKeyPairs(region string, in DescribeKeyPairsInput) response {
	s.mu.Lock()
	defer s.mu.Unlock()
	rd := s.region(region)
	for _, name := range in.KeyNames {
		if rd.keyPairs[name] == nil {
			return badRequest("InvalidKeyPair.NotFound", "The key pair '%s' does not exist", name)
		}
	}
	var all []*KeyPair
	for _, name := range sortedKeys(rd.keyPairs) {
		all = append(all, rd.keyPairs[name])
	}
	keys, _, errResp, ok := describe(describeSpec[*KeyPair]{
		in: DescribeInput{IDs: in.KeyPairIDs, Filters: in.Filters}, all: all, id: func(kp *KeyPair) string { return kp.ID },
		notFound: notFoundFirst("InvalidKeyPair.NotFound", "The key pair ID '%s' does not exist"),
		keep:     func(kp *KeyPair) bool { return len(in.KeyNames) == 0 || contains(in.KeyNames, kp.Name) },
		tags:     func(kp *KeyPair) map[string]string { return kp.Tags },
		field: func(kp *KeyPair, name string) []string {
			switch name {
			case "key-name":
				return []string{kp.Name}
			case "key-pair-id":
				return []string{kp.ID}
			case "fingerprint":
				return []string{kp.Fingerprint}
			}
			return nil
		},
	})
	if !ok {
		return errResp
	}
	out := xmlDescribeKeyPairs{ec2Meta: meta(), Keys: []xmlKeyPairInfo{}}
	for _, kp := range keys {
		out.Keys = append(out.Keys, xmlKeyPairInfo{KeyPairID: kp.ID, KeyName: kp.Name, KeyFingerprint: kp.Fingerprint, KeyType: kp.Type,
			CreateTime: kp.CreateTime, TagSet: xmlTags(kp.Tags)})
	}
	return xmlOK(out)
}

type xmlCreateKeyPair struct {
	XMLName xml.Name `xml:"CreateKeyPairResponse"`
	ec2Meta
	KeyName        string    `xml:"keyName"`
	KeyFingerprint string    `xml:"keyFingerprint"`
	KeyMaterial    string    `xml:"keyMaterial"`
	KeyPairID      string    `xml:"keyPairId"`
	TagSet         *[]xmlTag `xml:"tagSet>item,omitempty"`
}

type xmlDeleteKeyPair struct {
	XMLName xml.Name `xml:"DeleteKeyPairResponse"`
	ec2Meta
	Return    bool   `xml:"return"`
	KeyPairID string `xml:"keyPairId,omitempty"`
}

type xmlKeyPairInfo struct {
	KeyPairID      string    `xml:"keyPairId"`
	KeyName        string    `xml:"keyName"`
	KeyFingerprint string    `xml:"keyFingerprint"`
	KeyType        string    `xml:"keyType"`
	PublicKey      string    `xml:"publicKey,omitempty"`
	CreateTime     string    `xml:"createTime"`
	TagSet         *[]xmlTag `xml:"tagSet>item,omitempty"`
}

type xmlDescribeKeyPairs struct {
	XMLName xml.Name `xml:"DescribeKeyPairsResponse"`
	ec2Meta
	Keys []xmlKeyPairInfo `xml:"keySet>item"`
}

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
