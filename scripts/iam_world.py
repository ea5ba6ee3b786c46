"""Deploys the IAM of both templates into a moto server, for crates/testkit/it/iam.rs.

    .tools/sam-venv/bin/python scripts/iam_world.py ENDPOINT

The server must enforce IAM after 3 actions (scripts/moto_iam_server.py with
INITIAL_NO_AUTH_ACTION_COUNT=3): the first three create an administrator,
whose key then does everything else. Steps:

1. infra/template.yaml is turned into plain CloudFormation by
   aws-sam-translator (the library `sam` uses; .tools/sam-venv, pinned in
   scripts/requirements-sam.txt), infra/target-account.yaml is read as it is.
2. Every IAM role of both is created from the template's own documents, with
   their intrinsics (!Ref, !Sub, !GetAtt, !If, !Join and the conditions)
   resolved to the concrete names below. Nothing is re-typed here.
3. moto cannot let Lambda or ECS assume a role whose trust names a Service,
   so each function role and the runner task role is also given to an IAM
   user ("as-<role>") with exactly the role's inline policies: that user's
   key stands for the role's credentials. The launcher role is assumed for
   real, through STS, by the dispatch role's stand-in.
4. The target account's ECS world (network, cluster, runner task definition)
   and both buckets are made as the administrator, as the stacks would.

Prints one JSON object: keys, ARNs, names and the resolved documents.
Both stacks are in one account (the single-account setup of docs/DEPLOY.md).
"""

import json
import os
import re
import sys
from pathlib import Path

import boto3
import yaml
from samtranslator.translator.transform import transform

ROOT = Path(__file__).resolve().parent.parent
ACCOUNT, REGION, PARTITION = "123456789012", "us-east-1", "aws"
ENDPOINT = sys.argv[1]
NOVALUE = object()
os.environ["AWS_DEFAULT_REGION"] = REGION  # samtranslator reads it

PSEUDO = {
    "AWS::AccountId": ACCOUNT,
    "AWS::Region": REGION,
    "AWS::Partition": PARTITION,
    "AWS::URLSuffix": "amazonaws.com",
    "AWS::StackName": "sortie",
}
# Parameters without a usable default; everything else keeps the template's default.
PARAMS = {
    "JwtIssuer": "https://issuer.example.com",
    "JwtAudience": "sortie",
    "ControlPlaneAccountId": ACCOUNT,
    "ExternalId": "sortie-ext-0123456789abcdef",
    "OwnerOrg": "acme",
    "ControlPlaneBusArn": f"arn:aws:events:{REGION}:{ACCOUNT}:event-bus/sortie",
    "RunnerImage": f"{ACCOUNT}.dkr.ecr.{REGION}.amazonaws.com/sortie-runner:test",
    "RunnerRepositoryArn": f"arn:aws:ecr:{REGION}:{ACCOUNT}:repository/sortie-runner",
}

ARN = {
    "AWS::IAM::Role": "arn:aws:iam::{a}:role/{n}",
    "AWS::S3::Bucket": "arn:aws:s3:::{n}",
    "AWS::DynamoDB::Table": "arn:aws:dynamodb:{r}:{a}:table/{n}",
    "AWS::SQS::Queue": "arn:aws:sqs:{r}:{a}:{n}",
    "AWS::Events::EventBus": "arn:aws:events:{r}:{a}:event-bus/{n}",
    "AWS::Logs::LogGroup": "arn:aws:logs:{r}:{a}:log-group:{n}:*",
    "AWS::SNS::Topic": "arn:aws:sns:{r}:{a}:{n}",
    "AWS::KMS::Key": "arn:aws:kms:{r}:{a}:key/{n}",
}


class CfnLoader(yaml.SafeLoader):
    """YAML with CloudFormation's short forms (!Ref, !GetAtt A.B, !Sub, ...) as long forms."""


def _intrinsic(loader, suffix, node):
    if isinstance(node, yaml.ScalarNode):
        value = loader.construct_scalar(node)
    elif isinstance(node, yaml.SequenceNode):
        value = loader.construct_sequence(node, deep=True)
    else:
        value = loader.construct_mapping(node, deep=True)
    if suffix == "GetAtt" and isinstance(value, str):
        value = value.split(".", 1)
    key = suffix if suffix in ("Ref", "Condition") else f"Fn::{suffix}"
    return {key: value}


CfnLoader.add_multi_constructor("!", _intrinsic)


def yaml_parse(text):
    return yaml.load(text, Loader=CfnLoader)  # noqa: S506 (a SafeLoader subclass)


class Stack:
    def __init__(self, name, template):
        self.name, self.t = name, template
        self.params = dict(PSEUDO)
        for k, p in template.get("Parameters", {}).items():
            v = PARAMS.get(k, p.get("Default"))
            if p.get("Type") == "CommaDelimitedList" and isinstance(v, str):
                v = v.split(",")
            self.params[k] = v
        self.names = {}

    def resource_name(self, logical):
        r = self.t["Resources"][logical]
        props = r.get("Properties", {})
        for key in ("RoleName", "LogGroupName", "BucketName", "TableName", "QueueName", "Name"):
            if key in props:
                return self.resolve(props[key])
        return f"{self.name}-{logical}".lower() if r["Type"] != "AWS::IAM::Role" else f"{self.name}-{logical}"

    def attr(self, logical, attribute):
        r = self.t["Resources"][logical]
        if attribute == "Arn":
            return ARN[r["Type"]].format(a=ACCOUNT, r=REGION, n=self.resource_name(logical))
        if attribute == "QueueName":
            return self.resource_name(logical)
        raise KeyError(f"{logical}.{attribute}")

    def ref(self, name):
        if name in self.params:
            return self.params[name]
        if name == "AWS::NoValue":
            return NOVALUE
        return self.resource_name(name)

    def condition(self, name):
        return bool(self.resolve(self.t["Conditions"][name]))

    def resolve(self, v):
        if isinstance(v, dict) and len(v) == 1:
            (k, a), = v.items()
            if k == "Ref":
                return self.ref(a)
            if k == "Fn::GetAtt":
                a = a.split(".", 1) if isinstance(a, str) else a
                return self.attr(a[0], a[1])
            if k == "Fn::Sub":
                text, local = (a[0], a[1]) if isinstance(a, list) else (a, {})

                def one(m):
                    key = m.group(1)
                    if key in local:
                        return str(self.resolve(local[key]))
                    if "." in key and not key.startswith("AWS::"):
                        return self.attr(*key.split(".", 1))
                    return str(self.ref(key))
                return re.sub(r"\$\{([^}!]+)\}", one, text)
            if k == "Fn::If":
                return self.resolve(a[1] if self.condition(a[0]) else a[2])
            if k == "Fn::Join":
                items = self.resolve(a[1])
                return a[0].join(str(i) for i in items)
            if k == "Fn::Equals":
                return self.resolve(a[0]) == self.resolve(a[1])
            if k == "Fn::Not":
                return not self.resolve(a[0])
            if k == "Fn::And":
                return all(self.resolve(x) for x in a)
            if k == "Fn::Or":
                return any(self.resolve(x) for x in a)
            if k == "Condition":
                return self.condition(a)
        if isinstance(v, dict):
            out = {k: self.resolve(x) for k, x in v.items()}
            return {k: x for k, x in out.items() if x is not NOVALUE}
        if isinstance(v, list):
            out = []
            for x in v:
                x = self.resolve(x)
                if x is NOVALUE:
                    continue
                out.append(x)
            return out
        return v

    def roles(self):
        for logical, r in self.t["Resources"].items():
            if r["Type"] != "AWS::IAM::Role":
                continue
            if "Condition" in r and not self.condition(r["Condition"]):
                continue
            props = r["Properties"]
            policies = self.resolve(props.get("Policies", []))
            yield logical, {
                "name": self.resource_name(logical),
                "arn": self.attr(logical, "Arn"),
                "trust": self.resolve(props["AssumeRolePolicyDocument"]),
                "policies": {p["PolicyName"]: p["PolicyDocument"] for p in policies},
            }


def client(service, key=None):
    kw = {"aws_access_key_id": key[0], "aws_secret_access_key": key[1]} if key else {
        "aws_access_key_id": "testing", "aws_secret_access_key": "testing"}
    return boto3.client(service, endpoint_url=ENDPOINT, region_name=REGION, **kw)


class Loader:
    def load(self):
        return {}


def main():
    sam = yaml_parse((ROOT / "infra/template.yaml").read_text())
    # What `sam package` does before the transform: local code becomes an S3 object.
    for logical, r in sam["Resources"].items():
        if r["Type"] == "AWS::Serverless::Function":
            r["Properties"]["CodeUri"] = f"s3://sortie-packages/{logical}.zip"
    cfn = transform(sam, {}, Loader())
    control = Stack("sortie", cfn)
    target = Stack("sortie-target", yaml_parse((ROOT / "infra/target-account.yaml").read_text()))
    # The three unauthenticated actions: an administrator and its key.
    iam0 = client("iam")
    iam0.create_user(UserName="admin")
    iam0.put_user_policy(UserName="admin", PolicyName="admin", PolicyDocument=json.dumps(
        {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}))
    k = iam0.create_access_key(UserName="admin")["AccessKey"]
    admin = (k["AccessKeyId"], k["SecretAccessKey"])
    iam = client("iam", admin)


    out = {"roles": {}, "stand_ins": {}, "admin": admin}
    for stack in (control, target):
        for logical, role in stack.roles():
            iam.create_role(RoleName=role["name"], AssumeRolePolicyDocument=json.dumps(role["trust"]))
            for pname, doc in role["policies"].items():
                iam.put_role_policy(RoleName=role["name"], PolicyName=pname, PolicyDocument=json.dumps(doc))
            out["roles"][logical] = role
            if logical != "LauncherRole":
                user = f"as-{role['name']}"
                iam.create_user(UserName=user)
                for pname, doc in role["policies"].items():
                    iam.put_user_policy(UserName=user, PolicyName=pname, PolicyDocument=json.dumps(doc))
                k = iam.create_access_key(UserName=user)["AccessKey"]
                out["stand_ins"][logical] = [k["AccessKeyId"], k["SecretAccessKey"]]

    # The target account's ECS world and the buckets, as the stacks make them.
    ec2 = client("ec2", admin)
    vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    ec2.modify_vpc_attribute(VpcId=vpc, EnableDnsSupport={"Value": True})
    ec2.modify_vpc_attribute(VpcId=vpc, EnableDnsHostnames={"Value": True})
    subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.0.1.0/24")["Subnet"]["SubnetId"]
    sg = ec2.create_security_group(GroupName="sortie-runner", Description="runner", VpcId=vpc)["GroupId"]
    ecs = client("ecs", admin)
    cluster = target.params["ClusterName"]
    ecs.create_cluster(clusterName=cluster, capacityProviders=["FARGATE", "FARGATE_SPOT"])
    family = target.params["RunnerFamily"]
    ecs.register_task_definition(
        family=family, requiresCompatibilities=["FARGATE"], networkMode="awsvpc",
        cpu=target.params["RunnerCpu"], memory=target.params["RunnerMemory"],
        executionRoleArn=out["roles"]["RunnerExecutionRole"]["arn"],
        taskRoleArn=out["roles"]["RunnerTaskRole"]["arn"],
        containerDefinitions=[{"name": "runner", "image": target.params["RunnerImage"],
                               "memory": int(target.params["RunnerMemory"]), "essential": True}])
    # The control plane's queue and bus, named as the stack names them (the table is
    # made by the test, with the store's own schema).
    sqs = client("sqs", admin)
    queue_url = sqs.create_queue(QueueName=control.resource_name("JobsQueue"))["QueueUrl"]
    events = client("events", admin)
    events.create_event_bus(Name=control.resource_name("Bus"))
    # A probe of what is published on the bus: its sortie.job.ended events, and their
    # alias sortie.job.completed (published beside them for one release), go to a queue.
    probe = sqs.create_queue(QueueName="sortie-completions-probe")["QueueUrl"]
    probe_arn = sqs.get_queue_attributes(QueueUrl=probe, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    events.put_rule(Name="probe", EventBusName=control.resource_name("Bus"),
                    EventPattern=json.dumps({"source": ["sortie"],
                                            "detail-type": ["sortie.job.ended", "sortie.job.completed"]}))
    events.put_targets(Rule="probe", EventBusName=control.resource_name("Bus"),
                       Targets=[{"Id": "probe", "Arn": probe_arn}])
    out["control_plane"] = {"jobs_queue_url": queue_url, "bus": control.resource_name("Bus"),
                            "completions_probe_url": probe,
                            "table": control.resource_name("Table")}
    s3 = client("s3", admin)
    buckets = {"control_plane": control.resource_name("Bucket"), "state": target.resource_name("StateBucket")}
    for b in buckets.values():
        s3.create_bucket(Bucket=b)
    out.update({
        "external_id": target.params["ExternalId"],
        "owner_org": target.params["OwnerOrg"],
        "cluster": cluster,
        "family": family,
        "subnet": subnet,
        "security_group": sg,
        "buckets": buckets,
    })
    print(json.dumps(out))


if __name__ == "__main__":
    main()
