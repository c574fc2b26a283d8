-- A batch's updated providers are written in one statement. Their names are unique once the
-- statement has written every row, not after each row, so that two providers that swap names
-- (through a name one of them held in between, in the order the batch decided them) are
-- written together; the constraint keeps its name and its index.
ALTER TABLE resource_providers
    DROP CONSTRAINT resource_providers_name_key,
    ADD CONSTRAINT resource_providers_name_key UNIQUE (name) DEFERRABLE INITIALLY IMMEDIATE;
