"""A login bound to one tenant: its name says which, and no setting moves it (issue 31).

0031 keys the policies by the setting `memstore.tenant`, which any login may set: SQL written to
cross tenants (`set_config('memstore.tenant', 'other', true)` inside a query) reads another
tenant's rows over a login that serves several. A login that serves one tenant only (a reading
login for `memstore sql --tenant acme`, an application of one customer) is bound to it by its
name: a login whose name holds a `/` sees the tenant named after its last `/` (`reader/acme`:
tenant `acme`; `app/`: the default tenant), whatever the setting says, since a session cannot
change its own login (`session_user`). Tenants' names hold no `/`. Every other login is held to
the setting, as in 0031.

`memstore_tenant()` stays one expression that PostgreSQL inlines into each policy (no table is
read: a lookup would stop the inlining and run once per row). SQLite: nothing. The downgrade
puts 0031's function back.

Revision ID: 0032
Revises: 0031
Create Date: 2026-12-07
"""

from collections.abc import Sequence

from alembic import op

from memstore.store.revision_scripts import revision_module

revision: str = "0032"
down_revision: str | None = "0031"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

FUNCTION = """
CREATE OR REPLACE FUNCTION memstore_tenant() RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT CASE
        WHEN strpos(session_user, '/') > 0 THEN regexp_replace(session_user, '^.*/', '')
        WHEN current_setting('memstore.tenant', true) = '' THEN NULL
        WHEN current_setting('memstore.tenant', true) = '(default)' THEN ''
        ELSE current_setting('memstore.tenant', true)
    END
$$
"""


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(FUNCTION)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        previous = revision_module("0031").FUNCTION
        op.execute(previous.replace("CREATE FUNCTION", "CREATE OR REPLACE FUNCTION", 1))
