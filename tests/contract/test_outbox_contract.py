"""The outbox contract (append_outbox: a commit's PutMail; ListOutbox) over every store."""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qsl, urlsplit

import orjson
import pytest

from backends.redis import RedisStore
from identity_hosting.settings import DEV_INTERNAL_ADMIN_KEY, DEV_PROJECT
from identity_proto import Request, SeededEntropy, Service, ServiceOptions, run
from identity_proto.drivers import Store, arun
from identity_proto.effects import ListOutbox, append_outbox, perform
from identity_proto.records import Email
from tests.contract.conftest import AsyncBackend
from tests.contract.factories import OTHER_PROJECT, PROJECT, T0, in_threads, make_email
from tests.support import client_headers


def _append(store: Store, *emails: Email, keep: int = 1000, project_id: str = PROJECT) -> None:
    for email in emails:
        run(append_outbox(project_id, email, keep), store)


def test_an_empty_outbox_lists_nothing(store: Store) -> None:
    assert store.apply(ListOutbox(PROJECT)) == ()
    assert store.apply(ListOutbox(PROJECT, to="a@example.com")) == ()


def test_list_is_newest_first_and_round_trips_every_field(store: Store) -> None:
    emails = [make_email(i, f"user{i % 2}@example.com") for i in range(4)]
    unicode = Email("mail-ü", "zoë@exämple.com", "Ünïcode ✓ «subject» 🎉", 'body "quoted"\n\\ \t ✓', 1)
    _append(store, *emails, unicode)

    assert store.apply(ListOutbox(PROJECT)) == (unicode, *reversed(emails))


def test_list_filters_by_recipient(store: Store) -> None:
    emails = [make_email(i, f"user{i % 3}@example.com") for i in range(9)]
    _append(store, *emails)

    assert store.apply(ListOutbox(PROJECT, to="user1@example.com")) == (emails[7], emails[4], emails[1])
    assert store.apply(ListOutbox(PROJECT, to="nobody@example.com")) == ()


@pytest.mark.parametrize(
    "to",
    ["a@example.co", "A@example.com", "a@example.com ", '"a@example.com"', "a@example.comx"],
)
def test_the_filter_matches_the_address_exactly(store: Store, to: str) -> None:
    exact = make_email(1, "a@example.com")
    _append(store, exact)

    assert store.apply(ListOutbox(PROJECT, to=to)) == ()
    assert store.apply(ListOutbox(PROJECT, to="a@example.com")) == (exact,)


def test_the_filter_matches_unusual_addresses(store: Store) -> None:
    odd = [make_email(1, '"quoted\\name"@example.com'), make_email(2, "zoë@exämple.com"), make_email(3, "")]
    _append(store, *odd)

    for email in odd:
        assert store.apply(ListOutbox(PROJECT, to=email.to)) == (email,)


def test_list_returns_at_most_limit_items(store: Store) -> None:
    emails = [make_email(i, f"user{i % 2}@example.com") for i in range(10)]
    _append(store, *emails)

    assert store.apply(ListOutbox(PROJECT, limit=3)) == (emails[9], emails[8], emails[7])
    assert store.apply(ListOutbox(PROJECT, to="user0@example.com", limit=2)) == (emails[8], emails[6])
    assert store.apply(ListOutbox(PROJECT, limit=100)) == tuple(reversed(emails))
    assert store.apply(ListOutbox(PROJECT, limit=1)) == (emails[9],)


@pytest.mark.parametrize("limit", [0, -1])
def test_a_limit_below_one_lists_nothing(store: Store, limit: int) -> None:
    _append(store, make_email(1, "a@example.com"))

    assert store.apply(ListOutbox(PROJECT, limit=limit)) == ()
    assert store.apply(ListOutbox(PROJECT, to="a@example.com", limit=limit)) == ()


def test_the_filter_reads_past_a_page_of_other_mail(store: Store) -> None:
    wanted = make_email(0, "wanted@example.com")
    others = [make_email(i, "other@example.com") for i in range(1, 451)]
    _append(store, wanted, *others)

    assert store.apply(ListOutbox(PROJECT, to="wanted@example.com", limit=5)) == (wanted,)


def test_append_keeps_only_the_newest(store: Store) -> None:
    emails = [make_email(i, "a@example.com") for i in range(5)]
    _append(store, *emails, keep=3)

    assert store.apply(ListOutbox(PROJECT)) == (emails[4], emails[3], emails[2])
    # a larger keep later does not bring old mail back
    _append(store, make_email(5, "a@example.com"), keep=10)
    assert len(store.apply(ListOutbox(PROJECT))) == 4


def test_append_with_keep_zero_keeps_nothing(store: Store) -> None:
    _append(store, make_email(1, "a@example.com"))
    _append(store, make_email(2, "a@example.com"), keep=0)

    assert store.apply(ListOutbox(PROJECT)) == ()


def test_outboxes_are_per_project(store: Store) -> None:
    mine, theirs = make_email(1, "a@example.com"), make_email(2, "a@example.com")
    _append(store, mine)
    _append(store, theirs, project_id=OTHER_PROJECT)

    assert store.apply(ListOutbox(PROJECT)) == (mine,)
    assert store.apply(ListOutbox(OTHER_PROJECT, to="a@example.com")) == (theirs,)


def test_concurrent_appends_are_all_kept_up_to_keep(store: Store) -> None:
    def writer(offset: int) -> None:
        for i in range(25):
            run(append_outbox(PROJECT, make_email(offset + i, f"w{offset}@example.com"), keep=40), store)

    in_threads(lambda: writer(0), lambda: writer(100))

    kept = store.apply(ListOutbox(PROJECT, limit=1000))
    assert len(kept) == 40
    assert len({email.id for email in kept}) == 40


def test_async_outbox_through_arun(async_store: AsyncBackend) -> None:
    emails = [make_email(i, f"user{i % 2}@example.com") for i in range(4)]

    async def scenario(store: Any) -> list[Any]:
        for email in emails:
            await arun(append_outbox(PROJECT, email, keep=3), store)
        return [
            await arun(perform(ListOutbox(PROJECT)), store),
            await arun(perform(ListOutbox(PROJECT, to="user0@example.com", limit=5)), store),
        ]

    assert async_store.run(scenario) == [(emails[3], emails[2], emails[1]), (emails[2],)]


def test_redis_outbox_layout(redis_store: RedisStore) -> None:
    email = make_email(1, "a@example.com")
    run(append_outbox(PROJECT, email), redis_store)
    key = f"{redis_store.keys.namespace}{{p:{PROJECT}}}:outbox"

    assert redis_store.keys.outbox(PROJECT) == key
    assert redis_store.client.type(key) == b"list"
    assert redis_store.client.lrange(key, 0, -1) == [
        b'{"to":"a@example.com","id":"mail-1","subject":"Subject 1 \xe2\x9c\x93",'
        b'"text":"Hello \xc2\xaba@example.com\xc2\xbb,\\nyour code is 000001.","created_at_millis":4102444800001}'
    ]


# ---- a sign-in mail's code and magic link, as fields of the outbox item


def test_a_mails_code_and_magic_link_round_trip(store: Store) -> None:
    link = "http://localhost:3000/handler/magic-link-callback?after=%2Fhome&code=" + "a" * 45
    sign_in = Email("mail-1", "a@example.com", "Your code is ABC123", f"code ABC123\n{link}\n", T0, "ABC123", link)
    plain = make_email(2, "a@example.com")
    _append(store, sign_in, plain)

    assert store.apply(ListOutbox(PROJECT)) == (plain, sign_in)
    assert store.apply(ListOutbox(PROJECT, to="a@example.com", limit=1)) == (plain,)
    assert store.apply(ListOutbox(PROJECT, to="a@example.com"))[1].magic_link == link
    assert plain.code is None
    assert plain.magic_link is None


def test_a_sign_in_mail_in_the_outbox_carries_the_code_to_type_and_the_magic_link(store: Store) -> None:
    service, entropy = Service(ServiceOptions(password_rounds=4)), SeededEntropy(3)
    run(service.bootstrap(DEV_PROJECT, DEV_INTERNAL_ADMIN_KEY, now_ms=T0, entropy=entropy), store)

    def post(path: str, body: dict[str, Any]) -> dict[str, Any]:
        headers = (("content-type", "application/json"), *client_headers().items())
        response = run(service.handle(Request("POST", path, headers, orjson.dumps(body)), T0, entropy), store)
        assert response.status == 200, response.body
        data: dict[str, Any] = orjson.loads(response.body)
        return data

    callback = "http://localhost:3000/cb?next=%2Fhome"
    nonce = post("/api/v1/auth/otp/send-sign-in-code", {"email": "ada@example.com", "callback_url": callback})["nonce"]

    (mail,) = store.apply(ListOutbox(DEV_PROJECT.id, to="ada@example.com"))
    assert mail.code is not None
    assert mail.magic_link is not None
    assert len(mail.code) == 6
    assert mail.code == mail.code.upper()
    assert mail.subject.endswith(mail.code)
    assert mail.magic_link in mail.text
    link = urlsplit(mail.magic_link)
    assert (link.scheme, link.netloc, link.path) == ("http", "localhost:3000", "/cb")
    query = dict(parse_qsl(link.query))
    assert query["next"] == "/home"
    assert query["code"] == mail.code.lower() + nonce
    assert post("/api/v1/auth/otp/sign-in", {"code": mail.code + nonce})["is_new_user"] is True


def test_an_outbox_item_stored_before_code_fields_existed_reads_back_without_them(redis_store: RedisStore) -> None:
    old = '{"to":"a@example.com","id":"mail-0","subject":"Hi","text":"Hello","created_at_millis":1}'
    redis_store.client.lpush(redis_store.keys.outbox(PROJECT), old)

    assert redis_store.apply(ListOutbox(PROJECT, to="a@example.com")) == (
        Email("mail-0", "a@example.com", "Hi", "Hello", 1, code=None, magic_link=None),
    )
