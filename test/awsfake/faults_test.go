package awsfake

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// retryingClient is the SDK's standard retryer (3 attempts), with a backoff short enough for
// a test: what a retry after a lost answer meets is the point, not the wait.
func (e *ec2Env) retryingClient(region string) *ec2.Client {
	return ec2.New(ec2.Options{
		Region: region, BaseEndpoint: aws.String(e.url),
		Retryer: retry.NewStandard(func(o *retry.StandardOptions) {
			o.MaxAttempts = 3
			o.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return time.Millisecond, nil })
		}),
		Credentials: credentials.NewStaticCredentialsProvider("AKIAFAKEFAKEFAKE0001", "fakeSecret", ""),
	})
}

func TestParseFaultLoseAnswerAndHang(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Fault
	}{
		{"CreateKeyPair=lose-answer:2", Fault{LoseAnswer: 2}},
		{"CreateTags@us-west-2=hang", Fault{Hang: 1}},
		{"*=hang:3,lose-answer:1", Fault{Hang: 3, LoseAnswer: 1}},
	} {
		if _, _, f, err := ParseFault(tc.in); err != nil || f != tc.want {
			t.Errorf("ParseFault(%q) = %+v, %v; want %+v", tc.in, f, err, tc.want)
		}
	}
	if _, _, _, err := ParseFault("CreateTags=hang:x"); err == nil || !strings.Contains(err.Error(), "count") {
		t.Errorf("a bad count: %v", err)
	}
}

// lose-answer carries the call out and drops the answer: the SDK retries the same request and
// meets what the first one did, as against EC2 after a connection reset.
func TestLoseAnswerActsAndTheRetryMeetsIt(t *testing.T) {
	e := newEC2Env(t, nil)
	ctx := context.Background()
	c := e.retryingClient("us-east-1")
	e.fake.SetFault(OpCreateKeyPair, "us-east-1", Fault{LoseAnswer: 1})
	_, err := c.CreateKeyPair(ctx, &ec2.CreateKeyPairInput{KeyName: aws.String("lost"), KeyType: types.KeyTypeEd25519})
	if errorCode(err) != "InvalidKeyPair.Duplicate" {
		t.Fatalf("the retry of a lost CreateKeyPair: %v, want InvalidKeyPair.Duplicate", err)
	}
	if kps := e.fake.State("us-east-1", false).Regions["us-east-1"].KeyPairs; len(kps) != 1 || kps[0].Name != "lost" {
		t.Errorf("key pairs %+v: want the one the lost call made", kps)
	}
	var statuses []int
	for _, call := range e.fake.Calls() {
		if call.Op == OpCreateKeyPair {
			statuses = append(statuses, call.Status)
		}
	}
	if len(statuses) != 2 || statuses[0] != 0 || statuses[1] != 400 {
		t.Errorf("CreateKeyPair calls answered %v: want [0 400] (no answer, then the duplicate)", statuses)
	}

	// Without a retry the caller sees a connection error, not an AWS answer.
	e.fake.SetFault(OpCreateTags, "us-east-1", Fault{LoseAnswer: 1})
	vpc := e.fake.State("us-east-1", false).Regions["us-east-1"].Vpc.ID
	_, err = e.client("us-east-1").CreateTags(ctx, &ec2.CreateTagsInput{Resources: []string{vpc}, Tags: []types.Tag{{Key: aws.String("k"), Value: aws.String("v")}}})
	if err == nil || errorCode(err) != "" {
		t.Errorf("a lost answer without a retry: %v, want a connection error", err)
	}
}

// hang neither acts nor answers: the caller's deadline ends the call, and the next call is
// served.
func TestHangNeverAnswers(t *testing.T) {
	e := newEC2Env(t, nil)
	c := e.client("us-east-1")
	e.fake.SetFault(OpCreateKeyPair, "", Fault{Hang: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := c.CreateKeyPair(ctx, &ec2.CreateKeyPairInput{KeyName: aws.String("hung"), KeyType: types.KeyTypeEd25519})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a hung call: %v, want the deadline", err)
	}
	if d := time.Since(start); d < 150*time.Millisecond {
		t.Errorf("the hung call returned after %s, before its deadline", d)
	}
	if kps := e.fake.State("us-east-1", false).Regions["us-east-1"].KeyPairs; len(kps) != 0 {
		t.Errorf("a hung call made %+v", kps)
	}
	if _, err := c.CreateKeyPair(context.Background(), &ec2.CreateKeyPairInput{KeyName: aws.String("hung"), KeyType: types.KeyTypeEd25519}); err != nil {
		t.Errorf("the call after the hang: %v", err)
	}
}
