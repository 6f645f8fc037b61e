# A bare amazon-ebs launch (ebs_test.go): no provisioner, no SSH. The capacity scenario
# watches what the amazon plugin does when RunInstances answers InsufficientInstanceCapacity.
# Differs from a user's template only in the lines marked "fake endpoint".

variable "aws_endpoint" {
  type        = string
  description = "URL of test/cmd/dlami-fake-aws (fake endpoint)."
}

data "dlami" "base" {
  region              = "us-east-1"
  custom_endpoint_ec2 = var.aws_endpoint # fake endpoint
  ssm_endpoint        = var.aws_endpoint # fake endpoint
  sts_endpoint        = var.aws_endpoint # fake endpoint
}

source "amazon-ebs" "launch" {
  region                     = "us-east-1"
  custom_endpoint_ec2        = var.aws_endpoint # fake endpoint
  skip_credential_validation = true             # fake endpoint: amazon-ebs has no STS endpoint setting

  source_ami    = data.dlami.base.ami_id
  instance_type = "p5.48xlarge"
  communicator  = "none"
  # The capacity cases run one after another within a second: a name of their own each.
  ami_name      = "launch-${formatdate("YYYYMMDDhhmmss", timestamp())}-${uuidv4()}"
}

build {
  name    = "launch"
  sources = ["source.amazon-ebs.launch"]
}
