// Package pgx is a probe: it breaks the purity rule on purpose.
package pgx

import _ "github.com/jackc/pgx/v5"
