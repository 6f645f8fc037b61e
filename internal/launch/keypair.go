package launch

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"golang.org/x/crypto/ssh"

	"github.com/dlami-bake/packer-plugin-dlami/internal/awsaccess"
)

// createKeyPair makes the temporary key pair and keeps its private key. EC2 hands the private
// key out once: when an earlier try's answer was lost, the retry meets InvalidKeyPair.Duplicate
// and the key pair, which carries this launch's own name, is replaced.
func (in *Instance) createKeyPair(ctx context.Context, tags map[string]string) error {
	create := &ec2.CreateKeyPairInput{
		KeyName: aws.String(in.keyName), KeyType: types.KeyTypeEd25519,
		TagSpecifications: tagSpec(types.ResourceTypeKeyPair, tags),
	}
	var kp *ec2.CreateKeyPairOutput
	createKey := func(ctx context.Context) (err error) {
		kp, err = in.api.CreateKeyPair(ctx, create)
		return err
	}
	return in.stepCalls(ctx, func(ctx context.Context) error {
		err := in.patience.call(ctx, createKey)
		if awsaccess.APICode(err) == "InvalidKeyPair.Duplicate" {
			if err := in.patience.call(ctx, func(ctx context.Context) error {
				_, err := in.api.DeleteKeyPair(ctx, &ec2.DeleteKeyPairInput{KeyName: aws.String(in.keyName)})
				return err
			}); err != nil {
				return fmt.Errorf("replacing the key pair an unanswered try made: %w", err)
			}
			err = in.patience.call(ctx, createKey)
		}
		if err != nil {
			return err
		}
		signer, err := ssh.ParsePrivateKey([]byte(aws.ToString(kp.KeyMaterial)))
		if err != nil {
			return fmt.Errorf("the temporary key pair's private key is unreadable: %w", err)
		}
		in.Signer = signer
		return nil
	})
}

func (in *Instance) deleteKeyPair(ctx context.Context, say func(string)) error {
	// EC2 answers success for a key pair that does not exist: a retry after a lost answer is
	// success too.
	err := in.patience.retry(ctx, cleanupFinal, func(ctx context.Context) error {
		_, err := in.api.DeleteKeyPair(ctx, &ec2.DeleteKeyPairInput{KeyName: aws.String(in.keyName)})
		return err
	})
	if err != nil {
		return fmt.Errorf("deleting key pair %s: %w", in.keyName, err)
	}
	say("deleted temporary key pair " + in.keyName)
	return nil
}

// makeKeyPair is the launch's key pair step. As amazon-ebs does: EC2 makes the key pair and
// hands back the private key once. The name is kept before the call: a lost answer may still
// have made the key pair.
func (b *build) makeKeyPair(ctx context.Context, say func(string)) error {
	in := b.in
	in.keyName = "dlami-verify-" + b.suffix
	if err := in.createKeyPair(ctx, b.tags); err != nil {
		return fmt.Errorf("creating the temporary key pair %s: %w", in.keyName, err)
	}
	say("created temporary key pair " + in.keyName)
	return nil
}

// keyPairResources is the key pair as the cleanup removes it: it waits for nothing (EC2
// deletes a key pair in use).
func (in *Instance) keyPairResources() []resource {
	if in.keyName == "" {
		return nil
	}
	return []resource{{kind: KindKeyPair, weight: 2, remove: in.deleteKeyPair,
		left: func(err error) Leak { return Leak{Kind: KindKeyPair, IDs: []string{in.keyName}, Err: err} }}}
}
