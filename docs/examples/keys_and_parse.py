"""What a handle computes from one input, without writing anything: parse() (the stored JSON
form), idempotency_key_for(), tenant_for() and concurrency_key_for().

Run it: python docs/examples/keys_and_parse.py
"""

import atexit
import datetime
import decimal
import tempfile

import django
from django.conf import settings

TMP = tempfile.TemporaryDirectory()
atexit.register(TMP.cleanup)
settings.configure(
    INSTALLED_APPS=["ultimate_jobs"],
    DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": f"{TMP.name}/jobs.sqlite3"}},
    USE_TZ=True,
)
django.setup()

from ultimate_jobs import NO_TENANT, Concurrency, JobsError, job  # noqa: E402


@job(name="payouts.send", idempotency_key=lambda account_id, day, **_: f"payout:{account_id}:{day}",
     tenant="{org}", concurrency=Concurrency(key="{account_id}", limit=1))
def send_payout(ctx, *, org: str, account_id: str, day: datetime.date, amount: decimal.Decimal) -> None:
    pass


@job(name="tags.apply", idempotency_key="{tag}", tenant=NO_TENANT)
def apply_tag(ctx, *, tag: str) -> None:
    pass


def main() -> None:
    values = {"org": "acme", "account_id": "acct_9", "day": datetime.date(2026, 1, 31),
              "amount": decimal.Decimal("12.50")}
    print("parse:", send_payout.parse(values))
    print("parse(json):", send_payout.parse('{"org": "acme", "account_id": "a", "day": "x", "amount": "1"}'))
    print("key:", send_payout.idempotency_key_for(**values))
    print("tenant:", send_payout.tenant_for(**values))
    print("concurrency key:", send_payout.concurrency_key_for(**values))

    for bad in ({"org": "acme"}, {**values, "currency": "EUR"}, {**values, "amount": object()}):
        try:
            send_payout.parse(bad)
        except JobsError as err:
            print("refused:", err.code)
    try:
        apply_tag.idempotency_key_for(tag="")  # a key must never render empty
    except JobsError as err:
        print("empty key:", err.code)
    print("NO_TENANT job's tenant:", apply_tag.tenant_for(tag="vip"), "| no concurrency:",
          apply_tag.concurrency_key_for(tag="vip"))


if __name__ == "__main__":
    main()

# Output:
# parse: {'org': 'acme', 'account_id': 'acct_9', 'day': '2026-01-31', 'amount': '12.50'}
# parse(json): {'org': 'acme', 'account_id': 'a', 'day': 'x', 'amount': '1'}
# key: payout:acct_9:2026-01-31
# tenant: acme
# concurrency key: payouts.send:acct_9
# refused: X_JOB_INPUT_INVALID
# refused: X_JOB_INPUT_INVALID
# refused: X_JOB_INPUT_INVALID
# empty key: X_INVARIANT
# NO_TENANT job's tenant: None | no concurrency: None
