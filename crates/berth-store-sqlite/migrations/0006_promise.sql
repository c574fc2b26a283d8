-- Promise objects kept as JSON documents: flavors (kind 'flavor', id the flavor id), the
-- reservation policy (kind 'policy', id 'reservation') and instances created through Promise
-- (kind 'instance', id the instance uuid).

CREATE TABLE promise_objects (
    kind TEXT NOT NULL,
    id TEXT NOT NULL,
    document TEXT NOT NULL,
    CONSTRAINT promise_objects_pkey PRIMARY KEY (kind, id)
);
