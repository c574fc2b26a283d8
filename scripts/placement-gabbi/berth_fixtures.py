"""Placement's gabbi fixtures, building their data over HTTP against a running berth.

Placement's own fixtures (``placement.tests.functional.fixtures.gabbits``, installed with
``openstack-placement``) create their providers, inventories, traits and allocations through
Placement's database objects. Here the same fixture classes run unchanged, but the few helpers
they call (``tb.create_provider``, ``tb.add_inventory``, ``tb.set_traits``,
``tb.ensure_consumer``, ``tb.set_allocation``, users, projects and resource classes) are
replaced by calls to berth's Placement API, and the base fixture sets the environment variables
the gabbi files read instead of starting a database. So the data each file starts from is
exactly what Placement's fixture describes, and stays so when Placement changes it.

``BASE`` is set by the runner to the root of the berth Placement listener under test.
"""

import json
import os
import types
import urllib.error
import urllib.request

from oslo_utils import uuidutils
from oslo_utils.fixture import uuidsentinel as uuids
from placement.tests.functional.fixtures import gabbits as upstream

BASE = None

_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class SetupError(Exception):
    """A fixture's setup request was refused: the data the tests expect is not there."""


def call(method, path, body=None, version="latest"):
    """One admin request to berth's Placement; the decoded answer, or None when it has none."""
    headers = {
        "x-auth-token": "admin",
        "accept": "application/json",
        "openstack-api-version": "placement %s" % version,
    }
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        headers["content-type"] = "application/json"
    request = urllib.request.Request(BASE + path, data=data, method=method, headers=headers)
    try:
        with _OPENER.open(request, timeout=30) as response:
            text = response.read()
    except urllib.error.HTTPError as error:
        raise SetupError("%s %s: %s %s" % (method, path, error.code, error.read()[:500]))
    return json.loads(text) if text else None


def _generation(uuid):
    return call("GET", "/resource_providers/%s" % uuid)["generation"]


def _ensure_trait(name):
    if name.startswith("CUSTOM_"):
        call("PUT", "/traits/%s" % name)


def _ensure_class(name):
    if name.startswith("CUSTOM_"):
        call("PUT", "/resource_classes/%s" % name, version="1.7")


class Provider:
    """What the fixtures keep of a provider: its uuid and name, and aggregates to set."""

    def __init__(self, context, name, uuid):
        self._context = context
        self.name = name
        self.uuid = uuid

    def set_aggregates(self, aggregates):
        call(
            "PUT",
            "/resource_providers/%s/aggregates" % self.uuid,
            {"aggregates": list(aggregates), "resource_provider_generation": _generation(self.uuid)},
        )


class Party:
    """A user or project: only its external id matters to berth."""

    def __init__(self, context=None, external_id=None):
        self.external_id = external_id

    def create(self):
        pass


class Consumer:
    def __init__(self, uuid, user, project):
        self.uuid = uuid
        self.user = user
        self.project = project


class ResourceClass:
    def __init__(self, context=None, name=None):
        self.name = name

    def create(self):
        _ensure_class(self.name)


def create_provider(context, name, *aggs, **kwargs):
    uuid = kwargs.get("uuid", getattr(uuids, name))
    body = {"name": name, "uuid": uuid}
    if kwargs.get("parent"):
        body["parent_provider_uuid"] = kwargs["parent"]
    call("POST", "/resource_providers", body)
    provider = Provider(context, name, uuid)
    if aggs:
        provider.set_aggregates(aggs)
    return provider


def add_inventory(rp, rc, total, **kwargs):
    _ensure_class(rc)
    kwargs.setdefault("max_unit", total)
    body = dict(
        kwargs, resource_class=rc, total=total, resource_provider_generation=_generation(rp.uuid)
    )
    call("POST", "/resource_providers/%s/inventories" % rp.uuid, body)


def set_traits(rp, *traits):
    for name in traits:
        _ensure_trait(name)
    call(
        "PUT",
        "/resource_providers/%s/traits" % rp.uuid,
        {"traits": list(traits), "resource_provider_generation": _generation(rp.uuid)},
    )


def ensure_consumer(ctx, user, project, consumer_id=None):
    return Consumer(consumer_id or uuidutils.generate_uuid(), user, project)


def set_allocation(ctx, rp, consumer, rc_used_dict):
    """Replaces the consumer's allocations with these, as Placement's ``replace_all`` does."""
    path = "/allocations/%s" % consumer.uuid
    current = call("GET", path, version="1.28")
    call(
        "PUT",
        path,
        {
            "allocations": {rp.uuid: {"resources": dict(rc_used_dict)}},
            "project_id": consumer.project.external_id,
            "user_id": consumer.user.external_id,
            "consumer_generation": current.get("consumer_generation"),
        },
        version="1.28",
    )


def create_user_and_project(ctx, prefix="fake"):
    return Party(external_id="%s-user" % prefix), Party(external_id="%s-project" % prefix)


# The variables Placement's base fixture sets: fresh identifiers for every file.
_FRESH_UUIDS = (
    "RP_UUID RP_NAME RP_UUID1 RP_NAME1 RP_UUID2 RP_NAME2 PROJECT_ID ADMIN_PROJECT_ID "
    "SERVICE_PROJECT_ID USER_ID PROJECT_ID_ALT USER_ID_ALT INSTANCE_UUID MIGRATION_UUID "
    "CONSUMER_UUID PARENT_PROVIDER_UUID ALT_PARENT_PROVIDER_UUID"
).split()


class _Settings:
    """Stands in for the oslo.config and policy fixtures: berth's settings are its flags,
    chosen by the runner for each fixture class."""

    def config(self, **kwargs):
        pass

    def set_rules(self, rules):
        pass


def _start(self):
    self.context = None
    self.conf_fixture = _Settings()
    self.policy_fixture = _Settings()
    for name in _FRESH_UUIDS:
        os.environ[name] = uuidutils.generate_uuid()
    os.environ["CUSTOM_RES_CLASS"] = "CUSTOM_IRON_NFV"
    os.environ["CUSTOM_RES_CLASS1"] = "CUSTOM_IRON_NFV1"
    os.environ["CUSTOM_RES_CLASS2"] = "CUSTOM_IRON_NFV2"


def _stop(self):
    pass


def install():
    """Points Placement's fixture module at berth. Call once, before building the tests."""
    upstream.tb = types.SimpleNamespace(
        create_provider=create_provider,
        add_inventory=add_inventory,
        set_traits=set_traits,
        ensure_consumer=ensure_consumer,
        set_allocation=set_allocation,
        create_user_and_project=create_user_and_project,
    )
    upstream.user_obj = types.SimpleNamespace(User=Party)
    upstream.project_obj = types.SimpleNamespace(Project=Party)
    upstream.rc_obj = types.SimpleNamespace(ResourceClass=ResourceClass)
    upstream.APIFixture.start_fixture = _start
    upstream.APIFixture.stop_fixture = _stop
    return upstream
